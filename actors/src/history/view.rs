//! What the model reads of a path: the newest summary on it, then the
//! messages after the summarized part verbatim (each user message opened by
//! the working-memory block it was sent with, which `build_transcript`
//! renders). Pure, like `build_transcript`: the same tree gives the same
//! bytes, which keeps the provider's prompt cache warm between compactions.
//! The verbatim messages are the tree's shared per-message items; only the
//! one the summary leads is built anew.

use std::sync::Arc;

use crate::conversation::{build_transcript, Message, MessageTree, Role, ScreenshotOverlay};
use crate::ids::MessageId;
use crate::model::{ChatItem, ContentPart, Transcript, TranscriptChunk};

/// How a summary opens the first replayed user message.
pub const SUMMARY_BLOCK_OPEN: &str = "<conversation_summary>";

pub fn summary_block(text: &str) -> String {
    format!("{SUMMARY_BLOCK_OPEN}\n{text}\n</conversation_summary>")
}

/// The newest summary that applies to `path`: the index of the path message
/// it hangs from (the last one it covers) and the summary itself.
pub fn summary_cut<'a>(tree: &'a MessageTree, path: &[&Message]) -> Option<(usize, &'a Message)> {
    if !tree.has_summaries() {
        return None;
    }
    path.iter().enumerate().rev().find_map(|(index, message)| {
        tree.summaries()
            .rev()
            .find(|summary| summary.parent_id.as_ref() == Some(&message.id))
            .map(|summary| (index, summary))
    })
}

/// The root-to-`leaf` path, and its transcript as the model reads it, from
/// one walk of the tree (or none, when the tree remembers the path: see
/// `MessageTree::remember_path`): a turn needs both, and each walk is as long
/// as the conversation.
pub fn path_and_transcript<'t>(
    tree: &'t MessageTree,
    leaf: Option<&MessageId>,
) -> (Vec<&'t Message>, Transcript) {
    // Remembered only without summaries: the view is then the path's items.
    if let Some(remembered) = tree.remembered_path(leaf) {
        return remembered;
    }
    let steps = tree.path_items(leaf);
    let path: Vec<&Message> = steps.iter().map(|(message, _)| *message).collect();
    let transcript = match summary_cut(tree, &path) {
        Some((cut, summary)) => shared(Some(&summary.content), &steps[cut + 1..]),
        None => shared(None, &steps),
    };
    (path, transcript)
}

/// [`render`] over the tree's shared items: the same items, chunked, as
/// one shared history (each chunk counted once, here).
fn shared(summary: Option<&str>, steps: &[(&Message, &Arc<TranscriptChunk>)]) -> Transcript {
    let Some(summary) = summary.map(summary_block) else {
        return Transcript::history_of(steps.iter().map(|(_, items)| *items));
    };
    let mut chunks: Vec<Arc<TranscriptChunk>> = Vec::with_capacity(steps.len() + 1);
    let lead = steps.iter().position(|(message, items)| {
        message.role == Role::User && matches!(items.first(), Some(ChatItem::User(_)))
    });
    let Some(lead) = lead else {
        // As in `render`: nothing to lead, so the summary stands alone first.
        chunks.push(TranscriptChunk::shared(vec![ChatItem::User(vec![
            ContentPart::Text(summary),
        ])]));
        chunks.extend(steps.iter().map(|(_, items)| Arc::clone(items)));
        return Transcript::history(chunks);
    };
    for (index, (_, items)) in steps.iter().enumerate() {
        if index != lead {
            chunks.push(Arc::clone(items));
            continue;
        }
        let mut own = items.to_vec();
        if let Some(ChatItem::User(parts)) = own.first_mut() {
            parts.insert(0, ContentPart::Text(summary.clone()));
        }
        chunks.push(TranscriptChunk::shared(own));
    }
    Transcript::history(chunks)
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
                if let Some(summary) = summary.take() {
                    parts.insert(0, ContentPart::Text(summary));
                }
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
