//! List prices of a few well-known models, so `usage.cost_usd` can say what
//! a message cost. The turn engine asks `price_for` once per turn and prices
//! every request's `TokenUsage`; a model not in the table (local servers,
//! new names, `builtin:echo`) has no price and its `cost_usd` stays null,
//! since a guess would be worse than no number.
//!
//! Prices are the providers' published list prices in USD per million tokens
//! (checked 2025-10; prompt-cache writes at the 5-minute rate). Update the
//! table when they change; nothing else depends on the numbers.

use super::{ModelId, TokenUsage};

/// USD per million tokens of each kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    /// Prompt tokens neither read from nor written to the prompt cache.
    pub input: f64,
    /// Prompt tokens read from the cache.
    pub cache_read: f64,
    /// Prompt tokens written to the cache (Anthropic; OpenAI writes for free).
    pub cache_write: f64,
    pub output: f64,
}

/// `(provider, model name, price)`. A name also matches its dated snapshots
/// (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`).
const PRICES: &[(&str, &str, Price)] = &[
    ("openai", "gpt-4o", openai(2.50, 1.25, 10.00)),
    ("openai", "gpt-4o-mini", openai(0.15, 0.075, 0.60)),
    ("openai", "gpt-4.1", openai(2.00, 0.50, 8.00)),
    ("openai", "gpt-4.1-mini", openai(0.40, 0.10, 1.60)),
    ("anthropic", "claude-sonnet-4-5", anthropic(3.00, 15.00)),
    ("anthropic", "claude-sonnet-4", anthropic(3.00, 15.00)),
    ("anthropic", "claude-haiku-4-5", anthropic(1.00, 5.00)),
    ("anthropic", "claude-opus-4-1", anthropic(15.00, 75.00)),
];

/// Tokens per unit of the table's prices.
const TOKENS_PER_PRICE_UNIT: f64 = 1_000_000.0;

/// The price of `model`, if the table knows it.
pub fn price_for(model: &ModelId) -> Option<Price> {
    PRICES
        .iter()
        .find(|(provider, name, _)| {
            *provider == model.provider() && is_snapshot_of(model.name(), name)
        })
        .map(|(_, _, price)| *price)
}

impl Price {
    /// The cost of one request. `usage.input_tokens` counts every prompt
    /// token, cache reads and writes included (both adapters report it so).
    pub fn cost_usd(&self, usage: &TokenUsage) -> f64 {
        let uncached = usage
            .input_tokens
            .saturating_sub(usage.cache_read_tokens + usage.cache_write_tokens);
        let cost = uncached as f64 * self.input
            + usage.cache_read_tokens as f64 * self.cache_read
            + usage.cache_write_tokens as f64 * self.cache_write
            + usage.output_tokens as f64 * self.output;
        cost / TOKENS_PER_PRICE_UNIT
    }
}

/// OpenAI: cached prompt tokens at their discount, cache writes free.
const fn openai(input: f64, cache_read: f64, output: f64) -> Price {
    Price {
        input,
        cache_read,
        cache_write: 0.0,
        output,
    }
}

/// Anthropic: cache reads at a tenth of the input price, 5-minute writes at 1.25 times.
const fn anthropic(input: f64, output: f64) -> Price {
    Price {
        input,
        cache_read: input / 10.0,
        cache_write: input * 1.25,
        output,
    }
}

/// `name` is `base` or `base-<date>`, the date being digits and dashes.
fn is_snapshot_of(name: &str, base: &str) -> bool {
    match name.strip_prefix(base) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('-').is_some_and(|date| {
            !date.is_empty() && date.chars().all(|c| c.is_ascii_digit() || c == '-')
        }),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(id: &str) -> Option<Price> {
        price_for(&ModelId::parse(id).unwrap())
    }

    #[test]
    fn names_and_dated_snapshots_match_but_longer_names_do_not() {
        assert_eq!(price("openai:gpt-4o").unwrap().input, 2.50);
        assert_eq!(price("openai:gpt-4o-2024-08-06").unwrap().input, 2.50);
        assert_eq!(price("openai:gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(
            price("anthropic:claude-sonnet-4-5-20250929")
                .unwrap()
                .output,
            15.00
        );
        assert_eq!(price("openai:gpt-4o-audio-preview"), None);
        assert_eq!(price("anthropic:gpt-4o"), None);
        assert_eq!(price("openai:llama3"), None);
        assert_eq!(price("builtin:echo"), None);
    }

    #[test]
    fn cost_splits_prompt_tokens_by_cache_use() {
        let usage = TokenUsage {
            input_tokens: 16,
            output_tokens: 6,
            cache_read_tokens: 4,
            cache_write_tokens: 2,
        };
        // 10 uncached * 3 + 4 read * 0.3 + 2 written * 3.75 + 6 out * 15, per million.
        let cost = price("anthropic:claude-sonnet-4-5")
            .unwrap()
            .cost_usd(&usage);
        assert!((cost - 128.7e-6).abs() < 1e-12, "{cost}");
    }
}
