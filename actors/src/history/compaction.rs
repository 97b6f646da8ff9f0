//! Compaction: when the replayed path would exceed the token budget, the
//! oldest exchanges beyond the retained ones are folded into a stored summary
//! node. Planning is pure and happens in the session actor before the turn
//! starts; the summarizer call runs in the turn's task.

use super::auxiliary::AuxiliaryModel;
use super::view::{render, summary_cut};
use super::HistoryConfig;
use crate::contract::Attachment;
use crate::conversation::{now_millis, Message, MessageTree, Role, Segment, Usage};
use crate::ids::MessageId;
use crate::model::estimate::estimate_text;
use crate::model::{Purpose, Transcript};

/// The summarizer's system prompt. `builtin:echo` recognises it and answers
/// with a deterministic summary, so compaction is testable offline.
pub const SUMMARIZER_INSTRUCTIONS: &str = "You summarize the earlier part of a conversation \
between a user and an assistant, so that the assistant can continue it without the original \
messages. Keep names, preferences, decisions, open tasks, facts learned from tools, and anything \
the user asked to remember. Write plain prose of at most 300 words. Do not address the user.";

/// A summarizer call to make before the turn's first request.
#[derive(Debug)]
pub struct CompactionJob {
    model: AuxiliaryModel,
    /// What the summarizer reads (previous summary and folded messages, truncated).
    input: String,
    /// The last folded message: the summary hangs from it.
    cut: MessageId,
    /// The messages after the cut, replayed verbatim after the summary.
    retained: Vec<Message>,
}

/// A finished compaction.
pub struct Compacted {
    pub summary: Message,
    pub history: Transcript,
    pub usage: Usage,
}

impl CompactionJob {
    pub async fn run(self) -> Result<Compacted, String> {
        let (text, usage) = self
            .model
            .complete(Purpose::Summary, SUMMARIZER_INSTRUCTIONS, self.input)
            .await?;
        let summary = Message {
            id: MessageId::new(format!("{}:summary", self.cut)),
            parent_id: Some(self.cut),
            role: Role::Summary,
            content: text.trim().to_string(),
            host_block: None,
            attachments: Vec::new(),
            segments: Vec::new(),
            usage: Some(Box::new(usage.clone())),
            model: Some(self.model.id.shared_text()),
            error_type: None,
            memory_block: None,
            working_memory: None,
            idempotency: None,
            created_at: now_millis(),
        };
        let retained: Vec<&Message> = self.retained.iter().collect();
        let history = render(Some(&summary.content), &retained).into();
        Ok(Compacted {
            summary,
            history,
            usage,
        })
    }
}

/// The tokens `items` (the view of `view`) would cost with `system`: the
/// provider's count for the newest assistant message when it made a single
/// request (everything up to it, as the provider counted it) plus an estimate
/// of what follows, or the estimate alone. The estimate is also a floor: a
/// provider that reports less than it (a fake, a proxy) must not let a path
/// grow past what the real model accepts.
fn replayed_tokens(tree: &MessageTree, view: &[&Message], items: &Transcript, system: &str) -> u64 {
    let estimate = estimate_text(system) + items.estimated_tokens();
    let newest = view
        .iter()
        .rposition(|message| message.role == Role::Assistant);
    let reported = newest.and_then(|index| {
        let usage = view[index].usage.as_ref()?;
        (usage.requests == 1 && usage.input_tokens > 0).then(|| {
            // What follows it, measured from the tree's shared items of
            // each message rather than rendered again.
            let following: u64 = view[index + 1..]
                .iter()
                .filter_map(|message| tree.items_of(&message.id))
                .map(|chunk| chunk.estimated_tokens())
                .sum();
            usage.input_tokens + usage.output_tokens + following
        })
    });
    reported.map_or(estimate, |reported| reported.max(estimate))
}

/// Decides whether this turn compacts, and what. `None` when the path fits
/// the budget, when nothing lies beyond the retained exchanges, or when no
/// summarizer model is available (`model` is asked only when needed).
/// `replayed` is the path's view (`view::path_and_transcript`), as the turn sends it:
/// measured from the shared items, not rendered again.
pub fn plan_compaction(
    config: &HistoryConfig,
    tree: &MessageTree,
    path: &[&Message],
    replayed: &Transcript,
    system: &str,
    model: impl FnOnce() -> Option<AuxiliaryModel>,
) -> Option<CompactionJob> {
    if !config.compaction_enabled {
        return None;
    }
    let (start, previous) = match summary_cut(tree, path) {
        Some((cut, summary)) => (cut + 1, Some(summary.content.as_str())),
        None => (0, None),
    };
    let view = &path[start..];
    if replayed_tokens(tree, view, replayed, system) <= config.token_budget {
        return None;
    }
    let keep_from = retained_start(config, view)?;
    let cut = view[keep_from - 1].id.clone();
    let input = summarizer_input(
        previous,
        &view[..keep_from],
        config.message_truncation_limit,
    );
    let model = model()?;
    Some(CompactionJob {
        model,
        input,
        cut,
        retained: view[keep_from..]
            .iter()
            .map(|message| (*message).clone())
            .collect(),
    })
}

/// Where the verbatim part of `view` begins: the last `retain_recent`
/// exchanges, widened to hold the newest protected tool results. `None` when
/// that leaves nothing to fold.
fn retained_start(config: &HistoryConfig, view: &[&Message]) -> Option<usize> {
    let exchange_starts: Vec<usize> = view
        .iter()
        .enumerate()
        .filter(|(_, message)| message.role == Role::User)
        .map(|(index, _)| index)
        .collect();
    let first_kept = exchange_starts
        .len()
        .checked_sub(config.retain_recent.max(1))?;
    let mut keep_from = exchange_starts[first_kept];
    if config.protect_recent_tool_results > 0 {
        let mut results = view.iter().enumerate().rev().flat_map(|(index, message)| {
            let n_results = message
                .segments
                .iter()
                .map(|segment| match segment {
                    Segment::ToolGroup { tools } => tools.len(),
                    _ => 0,
                })
                .sum();
            std::iter::repeat_n(index, n_results)
        });
        let protected = results
            .by_ref()
            .take(config.protect_recent_tool_results)
            .last();
        if let Some(index) = protected {
            let exchange = exchange_starts
                .iter()
                .rev()
                .find(|&&start| start <= index)
                .copied()
                .unwrap_or(0);
            keep_from = keep_from.min(exchange);
        }
    }
    (keep_from > 0).then_some(keep_from)
}

fn truncated(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// A reference attachment as the summarizer (and so the summary) knows it: its label.
fn attachment_label(attachment: &Attachment) -> String {
    let label = attachment
        .name
        .clone()
        .or_else(|| attachment.description.clone())
        .unwrap_or_else(|| "unnamed".to_string());
    format!("[attachment: {label}]")
}

fn with_labels(text: String, attachments: &[Attachment]) -> String {
    let labels: Vec<String> = attachments.iter().map(attachment_label).collect();
    if labels.is_empty() {
        text
    } else {
        format!("{text} {}", labels.join(" "))
    }
}

/// The folded messages as plain lines, each cut at `limit` characters. Host
/// context blocks and thinking are left out: they describe a past screen and
/// a past train of thought, not the conversation.
fn summarizer_input(previous: Option<&str>, folded: &[&Message], limit: usize) -> String {
    let mut lines = Vec::with_capacity(folded.len() * 2 + 3);
    if let Some(previous) = previous {
        lines.push(format!("Summary of the conversation so far:\n{previous}\n"));
    }
    lines.push("Messages to add to the summary:".to_string());
    for message in folded {
        match message.role {
            Role::User => lines.push(with_labels(
                format!("User: {}", truncated(&message.content, limit)),
                &message.attachments,
            )),
            Role::Assistant => {
                for segment in &message.segments {
                    match segment {
                        Segment::Text { text } => {
                            lines.push(format!("Assistant: {}", truncated(text, limit)))
                        }
                        Segment::ToolGroup { tools } => {
                            for tool in tools {
                                let output = tool
                                    .output
                                    .as_ref()
                                    .map(|output| output.to_string())
                                    .unwrap_or_else(|| "no result".to_string());
                                lines.push(format!(
                                    "Tool {} {} -> {}",
                                    tool.name,
                                    truncated(&tool.input.to_string(), limit),
                                    truncated(&output, limit)
                                ));
                            }
                        }
                        Segment::Note {
                            text, attachments, ..
                        } => lines.push(with_labels(
                            format!("Note: {}", truncated(text, limit)),
                            attachments,
                        )),
                        Segment::Thinking { .. } => {}
                    }
                }
            }
            Role::Summary => {}
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Usage;
    use crate::model::ChatItem;

    fn message(id: &str, parent: Option<&str>, role: Role, text: &str) -> Message {
        Message {
            id: MessageId::new(id),
            parent_id: parent.map(MessageId::new),
            role,
            content: if role == Role::User {
                text.to_string()
            } else {
                String::new()
            },
            host_block: None,
            attachments: Vec::new(),
            segments: if role == Role::Assistant {
                vec![Segment::Text {
                    text: text.to_string(),
                }]
            } else {
                Vec::new()
            },
            usage: None,
            model: None,
            error_type: None,
            memory_block: None,
            working_memory: None,
            idempotency: None,
            created_at: 0,
        }
    }

    /// `n` exchanges of `size`-byte user messages, then one unanswered message.
    fn long_tree(n: usize, size: usize) -> MessageTree {
        let mut messages = Vec::new();
        let mut parent: Option<String> = None;
        for i in 0..n {
            let user = format!("u{i}");
            messages.push(message(
                &user,
                parent.as_deref(),
                Role::User,
                &"x".repeat(size),
            ));
            let reply = format!("a{i}");
            messages.push(message(&reply, Some(&user), Role::Assistant, "ok"));
            parent = Some(reply);
        }
        messages.push(message("now", parent.as_deref(), Role::User, "latest"));
        MessageTree::from_messages(messages)
    }

    /// The view of the path to `now`, as the session actor passes it.
    fn replayed(tree: &MessageTree) -> Transcript {
        super::super::path_and_transcript(tree, Some(&MessageId::new("now"))).1
    }

    fn config(budget: u64, retain: usize) -> HistoryConfig {
        HistoryConfig {
            token_budget: budget,
            retain_recent: retain,
            ..HistoryConfig::default()
        }
    }

    fn echo() -> Option<AuxiliaryModel> {
        Some(AuxiliaryModel {
            id: crate::model::ModelId::parse("builtin:echo").unwrap(),
            client: std::sync::Arc::new(crate::model::echo::EchoModel),
        })
    }

    #[test]
    fn a_path_within_budget_is_left_alone() {
        let tree = long_tree(3, 100);
        let path = tree.path_to(Some(&MessageId::new("now")));
        assert!(plan_compaction(
            &config(5_000, 2),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo
        )
        .is_none());
    }

    #[test]
    fn over_budget_the_oldest_exchanges_beyond_the_retained_are_folded() {
        let tree = long_tree(10, 4_000);
        let path = tree.path_to(Some(&MessageId::new("now")));
        let job = plan_compaction(
            &config(5_000, 2),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo,
        )
        .unwrap();
        // Retained: the current message and the exchange before it.
        assert_eq!(job.cut.as_str(), "a8");
        let ids: Vec<&str> = job.retained.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["u9", "a9", "now"]);
        assert!(job.input.contains("User: xxx"));
        assert!(
            job.input.contains('…'),
            "messages are truncated for the summarizer"
        );
    }

    #[test]
    fn compaction_needs_something_beyond_the_retained_exchanges() {
        let tree = long_tree(2, 40_000);
        let path = tree.path_to(Some(&MessageId::new("now")));
        assert!(plan_compaction(
            &config(5_000, 3),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo
        )
        .is_none());
    }

    #[test]
    fn recent_tool_results_keep_their_exchange_verbatim() {
        let mut tree = long_tree(10, 4_000);
        let mut with_tool = tree.get(&MessageId::new("a5")).unwrap().clone();
        with_tool.segments.push(Segment::ToolGroup {
            tools: vec![crate::conversation::ToolRecord {
                id: crate::ids::ToolCallId::new("c1"),
                name: "t".into(),
                input: serde_json::json!({}),
                category: crate::conversation::ToolCategory::Backend,
                output: Some(serde_json::json!({"ok": true})),
                outcome: Some(crate::conversation::CallOutcome::Success),
                status: None,
            }],
        });
        tree.upsert(with_tool);
        let path = tree.path_to(Some(&MessageId::new("now")));
        let job = plan_compaction(
            &config(5_000, 2),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo,
        )
        .unwrap();
        assert_eq!(job.cut.as_str(), "a4");
    }

    /// `long_tree(3, 100)` with the provider's count of 9,000 input and 10
    /// output tokens on the reply `reply_id`, made in one request.
    fn tree_with_reported_usage(reply_id: &str) -> MessageTree {
        let mut tree = long_tree(3, 100);
        let mut reply = tree.get(&MessageId::new(reply_id)).unwrap().clone();
        reply.usage = Some(Box::new(Usage {
            input_tokens: 9_000,
            output_tokens: 10,
            requests: 1,
            ..Usage::default()
        }));
        tree.upsert(reply);
        tree
    }

    #[test]
    fn reported_usage_counts_when_it_is_larger_than_the_estimate() {
        let tree = tree_with_reported_usage("a2");
        let path = tree.path_to(Some(&MessageId::new("now")));
        assert!(plan_compaction(
            &config(5_000, 1),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo
        )
        .is_some());
    }

    #[test]
    fn the_replayed_tail_is_measured_as_a_fresh_render_of_it() {
        let tree = tree_with_reported_usage("a1");
        let path = tree.path_to(Some(&MessageId::new("now")));
        // A view whose newest reply is a1, followed by one user message.
        let cut = path
            .iter()
            .position(|message| message.id.as_str() == "a1")
            .unwrap();
        let view = &path[..=cut + 1];
        assert_eq!(view[cut + 1].role, Role::User);
        let tail = crate::model::estimate::estimate_items(&render(None, &view[cut + 1..]));
        assert!(tail > 0);
        assert_eq!(
            replayed_tokens(&tree, view, &replayed(&tree), "sys"),
            9_000 + 10 + tail
        );
    }

    #[test]
    fn folded_reference_attachments_become_their_labels() {
        let mut user = message("u0", None, Role::User, "see the file");
        user.attachments = vec![crate::contract::Attachment::parse(
            &serde_json::json!({"kind": "text", "purpose": "reference",
                                "text": "SECRET BODY", "name": "report.txt"}),
            "attachments[0]",
        )
        .unwrap()];
        user.host_block = Some("<host_context>old screen</host_context>".into());
        let reply = message("a0", Some("u0"), Role::Assistant, "read it");
        let input = summarizer_input(Some("Before."), &[&user, &reply], 1_000);
        assert!(input.starts_with("Summary of the conversation so far:\nBefore."));
        assert!(
            input.contains("User: see the file [attachment: report.txt]"),
            "{input}"
        );
        assert!(input.contains("Assistant: read it"));
        assert!(!input.contains("SECRET BODY"), "only the label: {input}");
        assert!(!input.contains("host_context"), "past screens are left out");
    }

    #[test]
    fn echo_summarizes_deterministically_with_a_running_count() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tree = long_tree(6, 4_000);
        let path = tree.path_to(Some(&MessageId::new("now")));
        let job = plan_compaction(
            &config(5_000, 2),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo,
        )
        .unwrap();
        let first = runtime.block_on(job.run()).unwrap();
        assert!(
            first
                .summary
                .content
                .starts_with("Summary (builtin:echo): the user sent 5 messages before these"),
            "{}",
            first.summary.content
        );
        assert_eq!(first.summary.parent_id.as_ref().unwrap().as_str(), "a4");
        assert_eq!(first.usage.requests, 1);
        let again = plan_compaction(
            &config(5_000, 2),
            &tree,
            &path,
            &replayed(&tree),
            "sys",
            echo,
        )
        .unwrap();
        assert_eq!(
            runtime.block_on(again.run()).unwrap().summary.content,
            first.summary.content
        );
    }

    #[test]
    fn the_view_starts_with_the_summary_and_then_the_retained_messages() {
        let mut tree = long_tree(4, 10);
        let mut summary = message("a1:summary", Some("a1"), Role::Summary, "");
        summary.content = "They talked.".into();
        tree.upsert(summary);
        let items = replayed(&tree);
        assert_eq!(items.len(), 5, "u2 a2 u3 a3 now");
        match items.iter().next() {
            Some(ChatItem::User(parts)) => assert_eq!(
                parts[0],
                crate::model::ContentPart::Text(
                    "<conversation_summary>\nThey talked.\n</conversation_summary>".into()
                )
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_shared_view_equals_a_fresh_render_with_summary_and_memory() {
        let mut tree = long_tree(4, 10);
        let mut now = message("now", Some("a3"), Role::User, "latest");
        now.memory_block = Some("<working_memory>\n- a\n</working_memory>".into());
        tree.upsert(now);
        let leaf = MessageId::new("now");
        let path = tree.path_to(Some(&leaf));
        assert_eq!(replayed(&tree), Transcript::from(render(None, &path)));
        let mut summary = message("a1:summary", Some("a1"), Role::Summary, "");
        summary.content = "They talked.".into();
        tree.upsert(summary);
        let path = tree.path_to(Some(&leaf));
        let fresh = render(Some("They talked."), &path[4..]);
        assert_eq!(replayed(&tree), Transcript::from(fresh.clone()));
        match fresh.last() {
            Some(ChatItem::User(parts)) => assert_eq!(
                parts[0],
                crate::model::ContentPart::Text("<working_memory>\n- a\n</working_memory>".into())
            ),
            other => panic!("{other:?}"),
        }
    }
}
