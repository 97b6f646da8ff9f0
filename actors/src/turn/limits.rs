//! Bounds of one turn: model requests (`max_turns`) and the
//! `ASSISTANT__BUDGET__*` ceilings. Reaching one ends the turn as `usage_limit`.

use crate::conversation::Usage;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    pub tool_calls: Option<u32>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnLimits {
    /// Model requests per turn.
    pub max_requests: u32,
    pub budget: Budget,
}

impl TurnLimits {
    /// Why another model request may not be made, if it may not.
    pub fn exceeded_before_request(&self, usage: &Usage) -> Option<String> {
        if usage.requests >= self.max_requests {
            return Some(format!(
                "max_turns reached ({} model requests)",
                self.max_requests
            ));
        }
        let checks = [
            ("input_tokens", self.budget.input_tokens, usage.input_tokens),
            (
                "output_tokens",
                self.budget.output_tokens,
                usage.output_tokens,
            ),
            ("total_tokens", self.budget.total_tokens, usage.total_tokens),
        ];
        checks
            .into_iter()
            .find_map(|(name, limit, used)| match limit {
                Some(limit) if used >= limit => {
                    Some(format!("{name} budget reached ({used} of {limit})"))
                }
                _ => None,
            })
    }

    pub fn exceeded_tool_calls(&self, usage: &Usage) -> Option<String> {
        match self.budget.tool_calls {
            Some(limit) if usage.tool_calls > limit => Some(format!(
                "tool_calls budget reached ({} of {limit})",
                usage.tool_calls
            )),
            _ => None,
        }
    }
}
