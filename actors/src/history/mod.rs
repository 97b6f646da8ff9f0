//! Long conversations: history compaction and working memory.
//!
//! The model reads `view`: the newest stored summary on the path (if any)
//! followed by the messages after it, verbatim. Compaction folds the oldest
//! exchanges into a new summary, at a turn boundary only, so the prefix the
//! provider caches changes once and then stays byte-stable. Working memory is
//! a short list of durable facts, extracted after a turn and rendered into the
//! next user message (never the system prompt). Neither runs for silent
//! decisions (`output_mode: "host_tools"`): the host bounds that context.

mod auxiliary;
mod compaction;
mod memory;
mod view;

pub use crate::model::estimate::{estimate_items, estimate_text};
pub use auxiliary::AuxiliaryModel;
pub use compaction::{plan_compaction, CompactionJob, SUMMARIZER_INSTRUCTIONS};
pub use memory::{
    current_memory, memory_block_for, parse_memory, MemoryJob, MEMORY_BLOCK_OPEN,
    MEMORY_INSTRUCTIONS,
};
pub use view::{path_and_transcript, summary_cut, SUMMARY_BLOCK_OPEN};

use crate::conversation::{Message, Usage};
use crate::model::ModelId;
use crate::turn::{run_turn_guarded, TurnEnd, TurnInput, TurnOutput};

/// History settings (`HISTORY__*`, `LLM__SUMMARIZATION_MODEL`,
/// `ASSISTANT__ENABLE_WORKING_MEMORY`, `LLM__WORKING_MEMORY_MODEL`).
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryConfig {
    pub compaction_enabled: bool,
    /// Tokens the replayed path may reach before the oldest exchanges are folded.
    pub token_budget: u64,
    /// Exchanges (a user message and its replies) always replayed verbatim.
    pub retain_recent: usize,
    /// The exchanges holding this many of the newest tool results stay verbatim too.
    pub protect_recent_tool_results: usize,
    /// Characters of each message the summarizer reads.
    pub message_truncation_limit: usize,
    /// `None`: the turn's own model.
    pub summarization_model: Option<ModelId>,
    pub working_memory: Option<WorkingMemoryConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct WorkingMemoryConfig {
    /// `None`: the turn's own model.
    pub model: Option<ModelId>,
    pub max_entries: usize,
}

impl Default for HistoryConfig {
    /// The Python original's defaults; working memory off (it doubles model calls).
    fn default() -> HistoryConfig {
        HistoryConfig {
            compaction_enabled: true,
            token_budget: 100_000,
            retain_recent: 5,
            protect_recent_tool_results: 3,
            message_truncation_limit: 1_000,
            summarization_model: None,
            working_memory: None,
        }
    }
}

/// What the history jobs of one turn produced, for the session actor to store.
#[derive(Debug, Default)]
pub struct HistoryOutcome {
    /// A new summary node, stored beside the path with the turn's result.
    pub summary: Option<Message>,
}

/// The auxiliary work around one turn, decided by the session actor before it starts.
#[derive(Default)]
pub struct HistoryJobs {
    pub compaction: Option<CompactionJob>,
    pub memory: Option<MemoryJob>,
}

/// Runs one turn with its history work: compaction before the first request
/// (its summary replaces the folded prefix of `input.history`), working
/// memory after a completed turn. Either failing leaves things as they were,
/// logs a warning, and the turn goes on.
pub async fn run_turn_with_history(
    jobs: HistoryJobs,
    mut input: TurnInput,
) -> (TurnOutput, HistoryOutcome) {
    let mut outcome = HistoryOutcome::default();
    let mut auxiliary: Vec<(&'static str, Usage)> = Vec::new();
    // The auxiliary calls are boxed: held inline, their futures made this
    // one 9 KiB, copied into place on every turn that makes neither call.
    if let Some(job) = jobs.compaction {
        match Box::pin(job.run()).await {
            Ok(compacted) => {
                input.history = compacted.history;
                auxiliary.push(("summarization", compacted.usage));
                outcome.summary = Some(compacted.summary);
            }
            Err(problem) => {
                log::warn!("history compaction failed; history kept as it was: {problem}")
            }
        }
    }
    let mut output = run_turn_guarded(input).await;
    if let (Some(job), TurnEnd::Completed) = (jobs.memory, &output.end) {
        match Box::pin(job.run(&output.assistant)).await {
            Ok((entries, usage)) => {
                output.assistant.working_memory = Some(entries);
                auxiliary.push(("working_memory", usage));
            }
            Err(problem) => {
                log::warn!("working memory extraction failed; memory kept as it was: {problem}")
            }
        }
    }
    if !auxiliary.is_empty() {
        let usage = output.assistant.usage.get_or_insert_with(Box::default);
        for (name, part) in auxiliary {
            usage.auxiliary.insert(name.to_string(), part);
        }
    }
    (output, outcome)
}

/// What the session actor knows of a turn about to start.
pub struct TurnContext<'a> {
    pub tree: &'a crate::conversation::MessageTree,
    /// Root to the user message the turn answers.
    pub path: &'a [&'a Message],
    /// The path's view (`transcript`), as the turn will send it.
    pub history: &'a crate::model::Transcript,
    pub system: &'a str,
    pub turn_model: &'a ModelId,
    /// `output_mode: "host_tools"`: no auxiliary calls at all.
    pub silent: bool,
    /// A new assistant message (not one resumed after a host result): only
    /// then may the prefix be rewritten.
    pub new_reply: bool,
}

/// Decides the turn's auxiliary work. Pure apart from looking models up.
pub fn plan_jobs(
    config: &HistoryConfig,
    turn: TurnContext<'_>,
    models: &dyn crate::model::catalog::ModelCatalog,
) -> HistoryJobs {
    if turn.silent {
        return HistoryJobs::default();
    }
    let model_for = |configured: Option<&ModelId>| {
        let id = configured.unwrap_or(turn.turn_model).clone();
        match models.client_for(&id) {
            Ok(client) => Some(AuxiliaryModel { id, client }),
            Err(problem) => {
                log::warn!("history: model {id} cannot be used: {problem}");
                None
            }
        }
    };
    let compaction = if turn.new_reply {
        plan_compaction(
            config,
            turn.tree,
            turn.path,
            turn.history,
            turn.system,
            || model_for(config.summarization_model.as_ref()),
        )
    } else {
        None
    };
    let memory = config.working_memory.as_ref().and_then(|memory| {
        let user_text = turn
            .path
            .iter()
            .rev()
            .find(|message| message.role == crate::conversation::Role::User)
            .map(|message| message.content.clone())
            .unwrap_or_default();
        Some(MemoryJob {
            model: model_for(memory.model.as_ref())?,
            current: current_memory(turn.path),
            user_text,
            max_entries: memory.max_entries,
            truncation_limit: config.message_truncation_limit,
        })
    });
    HistoryJobs { compaction, memory }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The echo model skips the summary and memory blocks by these spellings.
    #[test]
    fn the_echo_model_knows_the_blocks() {
        let known = crate::model::echo::RUNTIME_BLOCK_OPENERS;
        assert!(known.contains(&SUMMARY_BLOCK_OPEN));
        assert!(known.contains(&MEMORY_BLOCK_OPEN));
    }
}
