//! Working memory: after a completed turn, a small model call updates a short
//! list of durable facts (preferences, names, decisions), stored on the turn's
//! assistant message. The next user message opens with the list as a
//! `<working_memory>` block, stored with that message so later replays show
//! the model exactly what it saw then (never the system prompt, which must
//! stay stable for the prompt cache).

use super::auxiliary::AuxiliaryModel;
use super::HistoryConfig;
use crate::conversation::{Message, MessageTree, Role, Usage};
use crate::ids::MessageId;
use crate::model::Purpose;

/// The extractor's system prompt. `builtin:echo` recognises it and keeps
/// every `remember <fact>` line of the user's text, so the path is testable offline.
pub const MEMORY_INSTRUCTIONS: &str = "You maintain the working memory of a conversation: a short \
list of durable facts about the user and the task (preferences, names, decisions, commitments). \
You get the current memory and the latest exchange. Reply with the complete updated memory as a \
JSON array of short strings, oldest first, and nothing else. Drop entries that are no longer \
true; never keep small talk.";

pub const MEMORY_BLOCK_OPEN: &str = "<working_memory>";

/// The longest single entry kept, in characters.
const MAX_ENTRY_CHARS: usize = 300;

/// A memory update to run after the turn completes.
#[derive(Debug)]
pub struct MemoryJob {
    pub model: AuxiliaryModel,
    pub current: Vec<String>,
    /// The text of the user message that opened the exchange.
    pub user_text: String,
    pub max_entries: usize,
    pub truncation_limit: usize,
}

impl MemoryJob {
    /// The updated list for the exchange that ended with `assistant`.
    pub async fn run(self, assistant: &Message) -> Result<(Vec<String>, Usage), String> {
        let reply = assistant.text();
        let input = format!(
            "<current_memory>\n{}\n</current_memory>\n<user>\n{}\n</user>\n<assistant>\n{}\n</assistant>",
            serde_json::to_string(&self.current).unwrap_or_else(|_| "[]".into()),
            cut(&self.user_text, self.truncation_limit),
            cut(&reply, self.truncation_limit),
        );
        let (text, usage) = self
            .model
            .complete(Purpose::Memory, MEMORY_INSTRUCTIONS, input)
            .await?;
        Ok((parse_memory(&text, self.max_entries)?, usage))
    }
}

fn cut(text: &str, limit: usize) -> &str {
    match text.char_indices().nth(limit) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The model's reply as a list: the JSON array in it (models like to wrap
/// one in a code fence), entries trimmed, empty and repeated ones dropped,
/// the newest `max_entries` kept.
pub fn parse_memory(reply: &str, max_entries: usize) -> Result<Vec<String>, String> {
    let start = reply.find('[');
    let end = reply.rfind(']');
    let (Some(start), Some(end)) = (start, end) else {
        return Err("the memory reply holds no JSON array".into());
    };
    if end < start {
        return Err("the memory reply holds no JSON array".into());
    }
    let values: Vec<serde_json::Value> = serde_json::from_str(&reply[start..=end])
        .map_err(|error| format!("the memory reply is not a JSON array: {error}"))?;
    let mut entries: Vec<String> = Vec::with_capacity(values.len());
    for value in values {
        let Some(text) = value.as_str() else { continue };
        let text = cut(text.trim(), MAX_ENTRY_CHARS).to_string();
        if !text.is_empty() && !entries.contains(&text) {
            entries.push(text);
        }
    }
    let excess = entries.len().saturating_sub(max_entries);
    entries.drain(..excess);
    Ok(entries)
}

/// The memory as of the end of `path`: the newest list on an assistant message.
pub fn current_memory(path: &[&Message]) -> Vec<String> {
    path.iter()
        .rev()
        .filter(|message| message.role == Role::Assistant)
        .find_map(|message| message.working_memory.clone())
        .unwrap_or_default()
}

pub fn render_block(entries: &[String]) -> String {
    let mut block = String::from(MEMORY_BLOCK_OPEN);
    block.push('\n');
    for entry in entries {
        block.push_str("- ");
        block.push_str(entry);
        block.push('\n');
    }
    block.push_str("</working_memory>");
    block
}

/// The block a new user message under `parent` opens with, if working memory
/// is on and holds anything.
pub fn memory_block_for(
    config: &HistoryConfig,
    tree: &MessageTree,
    parent: Option<&MessageId>,
) -> Option<String> {
    config.working_memory.as_ref()?;
    let entries = current_memory(&tree.path_to(parent));
    (!entries.is_empty()).then(|| render_block(&entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Segment;

    #[test]
    fn a_fenced_array_is_read_deduplicated_and_capped() {
        let reply = "```json\n[\"likes tea\", \" likes tea \", \"\", 3, \"name is Ada\", \"uses vim\"]\n```";
        assert_eq!(
            parse_memory(reply, 2).unwrap(),
            vec!["name is Ada".to_string(), "uses vim".to_string()]
        );
        assert!(parse_memory("no list here", 5).is_err());
    }

    #[test]
    fn echo_keeps_the_list_and_adds_remember_lines() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let job = MemoryJob {
            model: AuxiliaryModel {
                id: crate::model::ModelId::parse("builtin:echo").unwrap(),
                client: std::sync::Arc::new(crate::model::echo::EchoModel),
            },
            current: vec!["name is Ada".into()],
            user_text: "remember likes tea\nhello".into(),
            max_entries: 15,
            truncation_limit: 1_000,
        };
        let assistant = Message {
            id: MessageId::new("a"),
            parent_id: None,
            role: Role::Assistant,
            content: String::new(),
            host_block: None,
            attachments: Vec::new(),
            segments: vec![Segment::Text {
                text: "remember nothing from me".into(),
            }],
            usage: None,
            model: None,
            error_type: None,
            memory_block: None,
            working_memory: None,
            idempotency: None,
            created_at: 0,
        };
        let (entries, usage) = runtime.block_on(job.run(&assistant)).unwrap();
        assert_eq!(entries, ["name is Ada", "likes tea"]);
        assert_eq!(usage.requests, 1);
    }

    #[test]
    fn the_block_is_stable_text() {
        assert_eq!(
            render_block(&["a".into(), "b".into()]),
            "<working_memory>\n- a\n- b\n</working_memory>"
        );
    }
}
