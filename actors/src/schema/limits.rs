//! The bounds of the schema subset, in one place: how large a schema may be
//! when declared, how many steps an argument check may spend, what a check
//! on the caller's own thread may take, and how much the cache of compiled
//! schemas may hold. Also the two measures the budgets are spent in.

use serde_json::Value;

/// Deepest nesting of subschemas, after `$ref`s are inlined.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// Most subschemas in one schema, after `$ref`s are inlined.
pub const MAX_SCHEMA_NODES: usize = 2_000;
/// Longest `pattern` / `patternProperties` key, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1_000;
/// Most `pattern`s and `patternProperties` keys in one schema: each is
/// compiled when the schema is declared and again for every check.
pub const MAX_PATTERNS: usize = 64;
/// Size limit of one compiled regex (the `regex` crate's `size_limit`).
pub(super) const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Steps one argument check may spend (a step is a schema node applied to a
/// value, an item hashed for `uniqueItems`, or 256 bytes matched by a regex).
pub const VALIDATION_BUDGET: u64 = 200_000;
/// At most this many problems are reported to the model.
pub(super) const MAX_PROBLEMS: usize = 20;
/// Steps a check may take on the caller's thread (`check_arguments_inline`):
/// a few microseconds, less than handing the check to the blocking pool.
pub const INLINE_BUDGET: u64 = 256;
/// Longest string (or key) `check_arguments_inline` accepts in the arguments.
pub(super) const MAX_INLINE_STRING_BYTES: usize = 4_096;
/// Most compiled schemas kept by the cache.
pub(super) const MAX_CACHED_SCHEMAS: usize = 1_024;
/// Most memory, estimated, that cached schemas hold (see `weight_of`); one
/// schema may take a quarter of it, so a schema of up to 15 patterns is kept.
pub(super) const MAX_CACHE_WEIGHT: usize = 64 << 20;

/// Whether `value` has at most `limit` JSON values in it, none a string
/// longer than `MAX_INLINE_STRING_BYTES` (stops at the first excess, so a
/// large value costs no more to refuse than a small one).
pub(super) fn weighs_at_most(value: &Value, limit: u64) -> bool {
    fn count(value: &Value, left: &mut u64) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match value {
            Value::Array(items) => items.iter().all(|item| count(item, left)),
            Value::Object(object) => object
                .iter()
                .all(|(key, member)| key.len() <= MAX_INLINE_STRING_BYTES && count(member, left)),
            Value::String(text) => text.len() <= MAX_INLINE_STRING_BYTES,
            _ => true,
        }
    }
    let mut left = limit;
    count(value, &mut left)
}

/// How many steps handling `value` as a whole costs (its JSON size / 256).
pub(super) fn weight(value: &Value) -> u64 {
    fn nodes(value: &Value) -> u64 {
        match value {
            Value::Array(items) => 1 + items.iter().map(nodes).sum::<u64>(),
            Value::Object(object) => {
                1 + object
                    .iter()
                    .map(|(key, value)| key.len() as u64 / 256 + nodes(value))
                    .sum::<u64>()
            }
            Value::String(text) => 1 + text.len() as u64 / 256,
            _ => 1,
        }
    }
    nodes(value)
}
