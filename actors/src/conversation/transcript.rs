//! Turns stored messages into the provider-neutral transcript. This is the one
//! place that decides what the model reads, and it is pure: the same messages
//! give the same items, which is what keeps the provider's prompt cache warm
//! (runtime.md section 3, the stable prefix).

use std::collections::HashMap;

use super::message::{CallOutcome, Message, Role, Segment, ToolRecord};
use crate::contract::{Attachment, AttachmentKind, AttachmentSource};
use crate::model::{AssistantPart, ChatItem, ContentPart, MediaSource, ToolResultItem};

/// Content that exists only for the live turn (a `look_at_screen` image) and
/// is shown to the model with a tool result without ever being stored.
pub type ScreenshotOverlay = HashMap<String, Vec<ContentPart>>;

/// The transcript of a root-to-leaf path.
pub fn build_transcript(path: &[&Message], overlay: &ScreenshotOverlay) -> Vec<ChatItem> {
    // Exact for a message without tool calls: most calls build one message
    // into a chunk kept as a boxed slice, which a spare slot would reallocate.
    let mut items = Vec::with_capacity(path.iter().map(|message| items_hint(message)).sum());
    for message in path {
        match message.role {
            Role::User => items.push(ChatItem::User(user_parts(message))),
            Role::Assistant => push_assistant(&mut items, &message.segments, overlay),
            // Read through `history::view`, which puts it where it belongs.
            Role::Summary => {}
        }
    }
    items
}

/// The items a message gives when it made no tool calls (more when it did).
fn items_hint(message: &Message) -> usize {
    match message.role {
        Role::User => 1,
        Role::Assistant => usize::from(!message.segments.is_empty()),
        Role::Summary => 0,
    }
}

/// A user message opens with its working-memory block (history's), then its
/// host context block, both as first sent: the bytes replay unchanged.
fn user_parts(message: &Message) -> Vec<ContentPart> {
    // Exactly as many as pushed: the parts stay in the session's transcript
    // cache for as long as it is resident.
    let with_content = !message.content.is_empty() || message.host_block.is_none();
    let mut parts = Vec::with_capacity(
        usize::from(message.memory_block.is_some())
            + usize::from(message.host_block.is_some())
            + usize::from(with_content)
            + message.attachments.len(),
    );
    if let Some(block) = &message.memory_block {
        parts.push(ContentPart::Text(block.clone()));
    }
    if let Some(block) = &message.host_block {
        parts.push(ContentPart::Text(block.to_string()));
    }
    if with_content {
        parts.push(ContentPart::Text(message.content.clone()));
    }
    parts.extend(message.attachments.iter().map(attachment_part));
    parts
}

/// A reference attachment as native model content.
pub fn attachment_part(attachment: &Attachment) -> ContentPart {
    let label = attachment
        .name
        .clone()
        .or_else(|| attachment.description.clone());
    match (&attachment.kind, &attachment.source) {
        (_, AttachmentSource::Text(text)) => match &label {
            Some(label) => ContentPart::Text(format!("[attachment: {label}]\n{text}")),
            None => ContentPart::Text(text.to_string()),
        },
        (AttachmentKind::Image, source) => ContentPart::Image(media_source(source)),
        (_, source) => ContentPart::Document {
            source: media_source(source),
            name: label,
        },
    }
}

fn media_source(source: &AttachmentSource) -> MediaSource {
    match source {
        AttachmentSource::DataUri(uri) => {
            MediaSource::from_data_uri(uri).unwrap_or_else(|| MediaSource::Url(uri.to_string()))
        }
        AttachmentSource::Url(url) => MediaSource::Url(url.clone()),
        AttachmentSource::Text(text) => MediaSource::Url(text.to_string()),
    }
}

fn push_assistant(items: &mut Vec<ChatItem>, segments: &[Segment], overlay: &ScreenshotOverlay) {
    // Room for every part at once: grown from empty, a reply of one text
    // part held four, in the transcript cache of every resident message.
    let n_parts = segments
        .iter()
        .map(|segment| match segment {
            Segment::Thinking { .. } | Segment::Text { .. } => 1,
            Segment::ToolGroup { tools } => tools.len(),
            Segment::Note { .. } => 0,
        })
        .sum();
    let mut response: Vec<AssistantPart> = Vec::with_capacity(n_parts);
    for segment in segments {
        match segment {
            Segment::Thinking { text, signature } => response.push(AssistantPart::Thinking {
                text: text.clone(),
                signature: signature.clone(),
            }),
            Segment::Text { text } => response.push(AssistantPart::Text(text.clone())),
            Segment::ToolGroup { tools } => {
                response.extend(tools.iter().map(|tool| AssistantPart::ToolCall {
                    id: tool.id.to_string(),
                    name: tool.name.clone(),
                    arguments: tool.input.clone(),
                }));
                items.push(ChatItem::Assistant(std::mem::take(&mut response)));
                items.extend(
                    tools
                        .iter()
                        .map(|tool| ChatItem::ToolResult(tool_result(tool, overlay))),
                );
            }
            Segment::Note {
                text, attachments, ..
            } => {
                if !response.is_empty() {
                    items.push(ChatItem::Assistant(std::mem::take(&mut response)));
                }
                let mut parts = vec![ContentPart::Text(text.clone())];
                parts.extend(attachments.iter().map(attachment_part));
                items.push(ChatItem::User(parts));
            }
        }
    }
    if !response.is_empty() {
        items.push(ChatItem::Assistant(response));
    }
}

fn tool_result(tool: &ToolRecord, overlay: &ScreenshotOverlay) -> ToolResultItem {
    let text = match &tool.output {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(output) => output.to_string(),
        None => "{\"status\":\"no_result\"}".to_string(),
    };
    let mut content = vec![ContentPart::Text(text)];
    if let Some(extra) = overlay.get(tool.id.as_str()) {
        content.extend(extra.iter().cloned());
    }
    ToolResultItem {
        call_id: tool.id.to_string(),
        tool_name: tool.name.clone(),
        content,
        is_error: !matches!(tool.outcome, Some(CallOutcome::Success)),
    }
}
