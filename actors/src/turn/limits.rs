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

/// The thinking budget a turn runs with. A request may lower the configured
/// ceiling (`ASSISTANT__THINKING_BUDGET`) but never raise it; without a
/// request value the ceiling is also the default. With no ceiling configured
/// the request's own budget is used as asked: thinking stays off unless a
/// request turns it on, and the `ASSISTANT__BUDGET__*` token ceilings bound
/// what it can spend. `Some(0)` means thinking off.
pub fn thinking_budget(asked: Option<u32>, ceiling: Option<u32>) -> Option<u32> {
    match (asked, ceiling) {
        (Some(asked), Some(ceiling)) => Some(asked.min(ceiling)),
        (Some(asked), None) => Some(asked),
        (None, ceiling) => ceiling,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_budget_is_lowered_never_raised_and_asked_without_ceiling() {
        let check = |asked, ceiling, expected| {
            assert_eq!(
                thinking_budget(asked, ceiling),
                expected,
                "{asked:?} {ceiling:?}"
            );
        };
        check(Some(2000), Some(4000), Some(2000));
        check(Some(8000), Some(4000), Some(4000));
        check(Some(0), Some(4000), Some(0));
        check(None, Some(4000), Some(4000));
        check(Some(3000), None, Some(3000));
        check(None, None, None);
    }
}
