//! What the model reads of a path: the newest summary on it, then the
//! messages after the summarized part verbatim, each user message opened by
//! the working-memory block it was sent with. Pure, like `build_transcript`:
//! the same tree gives the same bytes, which keeps the provider's prompt
//! cache warm between compactions.

use crate::conversation::{build_transcript, Message, MessageTree, Role, ScreenshotOverlay};
use crate::model::{ChatItem, ContentPart};

/// How a summary opens the first replayed user message.
pub const SUMMARY_BLOCK_OPEN: &str = "<conversation_summary>";

pub fn summary_block(text: &str) -> String {
    format!("{SUMMARY_BLOCK_OPEN}\n{text}\n</conversation_summary>")
}

/// The newest summary that applies to `path`: the index of the path message
/// it hangs from (the last one it covers) and the summary itself.
pub fn summary_cut<'a>(tree: &'a MessageTree, path: &[&Message]) -> Option<(usize, &'a Message)> {
    let summaries: Vec<&Message> = tree
        .all()
        .iter()
        .filter(|message| message.role == Role::Summary)
        .collect();
    if summaries.is_empty() {
        return None;
    }
    path.iter().enumerate().rev().find_map(|(index, message)| {
        summaries
            .iter()
            .rev()
            .find(|summary| summary.parent_id.as_ref() == Some(&message.id))
            .map(|summary| (index, *summary))
    })
}

/// The transcript of `path` as the model reads it.
pub fn transcript(tree: &MessageTree, path: &[&Message]) -> Vec<ChatItem> {
    match summary_cut(tree, path) {
        Some((cut, summary)) => render(Some(&summary.content), &path[cut + 1..]),
        None => render(None, path),
    }
}

/// `messages` verbatim, the summary (if any) leading the first user message.
pub(super) fn render(summary: Option<&str>, messages: &[&Message]) -> Vec<ChatItem> {
    let overlay = ScreenshotOverlay::new();
    let mut items = Vec::with_capacity(messages.len() * 2 + 1);
    let mut summary = summary.map(summary_block);
    for message in messages {
        let mut own = build_transcript(std::slice::from_ref(message), &overlay);
        if message.role == Role::User {
            if let Some(ChatItem::User(parts)) = own.first_mut() {
                let lead: Vec<ContentPart> = summary
                    .take()
                    .into_iter()
                    .chain(message.memory_block.clone())
                    .map(ContentPart::Text)
                    .collect();
                parts.splice(0..0, lead);
            }
        }
        items.extend(own);
    }
    if let Some(summary) = summary {
        // Nothing after the summary opens with a user message (never made
        // by compaction, which always retains the current one); keep it anyway.
        items.insert(0, ChatItem::User(vec![ContentPart::Text(summary)]));
    }
    items
}
