//! Token estimates for what a request replays: `builtin:echo`'s reported
//! input, a cancelled turn's input (no provider reported it), and history
//! compaction's measure when the provider has not reported a count (and as a
//! floor when it has, see `history::compaction::replayed_tokens`).
//!
//! The estimate is one token per four bytes of text (the usual rule of thumb
//! for English and JSON with OpenAI and Anthropic tokenizers), plus four
//! tokens of framing per transcript item, and a flat 1,000 tokens per image
//! or document (a typical screenshot or page costs about that much).

use crate::model::{AssistantPart, ChatItem, ContentPart};

const BYTES_PER_TOKEN: u64 = 4;
const TOKENS_PER_ITEM: u64 = 4;
const TOKENS_PER_MEDIA: u64 = 1_000;

pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

fn estimate_parts(parts: &[ContentPart]) -> u64 {
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Text(text) => estimate_text(text),
            ContentPart::Image(_) | ContentPart::Document { .. } => TOKENS_PER_MEDIA,
        })
        .sum()
}

/// The estimated tokens of transcript items.
pub fn estimate_items<'a>(items: impl IntoIterator<Item = &'a ChatItem>) -> u64 {
    items
        .into_iter()
        .map(|item| {
            TOKENS_PER_ITEM
                + match item {
                    ChatItem::User(parts) => estimate_parts(parts),
                    ChatItem::Assistant(parts) => parts
                        .iter()
                        .map(|part| match part {
                            AssistantPart::Text(text) | AssistantPart::Thinking { text, .. } => {
                                estimate_text(text)
                            }
                            AssistantPart::ToolCall {
                                name, arguments, ..
                            } => estimate_text(name) + estimate_text(&arguments.to_string()),
                        })
                        .sum(),
                    ChatItem::ToolResult(result) => {
                        estimate_text(&result.tool_name) + estimate_parts(&result.content)
                    }
                }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bytes_a_token_plus_framing() {
        let items = vec![ChatItem::User(vec![ContentPart::Text("x".repeat(400))])];
        assert_eq!(estimate_items(&items), 104);
        assert_eq!(estimate_text("abcde"), 2);
    }
}
