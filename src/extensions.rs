//! What a host's definition adds to the runtime the settings describe:
//! tools, state, profile, limits and the `authenticate` hook. Built by
//! `embed::AssistantDefinition`, read by `startup`.

use actors::prompt::profile::Profile;
use actors::tools::{DepsFactory, SharedTool};
use actors::turn::Budget;
use serde_json::Value;

use crate::access::identity::AuthenticateHook;
use crate::settings::Settings;

/// What `build` adds to the settings' runtime. `Default` adds nothing.
/// Internal: a host describes these through `AssistantDefinition`.
#[derive(Clone, Default)]
pub(crate) struct Extensions {
    /// Backend tools offered after the built-in ones, in this order.
    pub(crate) tools: Vec<SharedTool>,
    /// Reports of MCP servers (filled by startup).
    pub(crate) mcp_servers: Vec<Value>,
    pub(crate) deps: Option<DepsFactory>,
    /// Used when neither `ASSISTANT__PROFILE` nor `ASSISTANT__SYSTEM_PROMPT` is set.
    pub(crate) profile: Option<Profile>,
    pub(crate) max_turns: Option<u32>,
    pub(crate) budget: Budget,
    /// Who a caller is (`ACCESS__MODE=host`, which a hook makes the default).
    pub(crate) authenticate: Option<AuthenticateHook>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("tools", &self.tools.len())
            .field("mcp_servers", &self.mcp_servers)
            .field("profile", &self.profile)
            .field("max_turns", &self.max_turns)
            .field("budget", &self.budget)
            .field("authenticate", &self.authenticate.is_some())
            .finish_non_exhaustive()
    }
}

impl Extensions {
    /// The profile the system prompt comes from: an operator's setting wins
    /// over the host's default profile, which wins over the builtin one.
    pub(crate) fn profile(&self, settings: &Settings) -> Profile {
        match (&self.profile, &settings.profile, &settings.system_prompt) {
            (Some(profile), None, None) => profile.clone(),
            _ => settings.effective_profile(),
        }
    }

    /// The stricter of the settings' and the host's limits.
    pub(crate) fn max_turns(&self, settings: &Settings) -> u32 {
        self.max_turns
            .map_or(settings.max_turns, |own| own.min(settings.max_turns))
    }

    /// Each ceiling is the stricter of the settings' and the host's.
    pub(crate) fn budget(&self, settings: &Settings) -> Budget {
        fn stricter<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        let ours = self.budget;
        let theirs = settings.budget;
        Budget {
            tool_calls: stricter(ours.tool_calls, theirs.tool_calls),
            input_tokens: stricter(ours.input_tokens, theirs.input_tokens),
            output_tokens: stricter(ours.output_tokens, theirs.output_tokens),
            total_tokens: stricter(ours.total_tokens, theirs.total_tokens),
        }
    }
}
