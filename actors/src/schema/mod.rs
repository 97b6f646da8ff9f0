//! JSON schemas of tool parameters: checked once when declared, then used to
//! check the model's arguments with a bound on work.
//!
//! Host schemas are untrusted input, so this is our own validator for a
//! documented subset of JSON Schema rather than a general engine: valico
//! follows `$ref` cycles until the stack overflows, matches `pattern` with a
//! backtracking engine (fancy-regex) and compares `uniqueItems` pairwise.
//! Here a schema is compiled into a finite tree (local `$ref`s inlined, no
//! cycles, bounded depth and size, regexes built by the linear-time `regex`
//! crate with a size limit), and validation spends a step budget: running out
//! is a failed check the model can retry, never a pinned thread.
//!
//! Supported: `type`, `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `patternProperties`, `propertyNames`,
//! `minProperties`/`maxProperties`, `dependencies`/`dependentRequired`/
//! `dependentSchemas`, `items` (schema or tuple), `prefixItems`,
//! `additionalItems`, `minItems`/`maxItems`, `uniqueItems`, `contains`,
//! `minimum`/`maximum`, `exclusiveMinimum`/`exclusiveMaximum` (number or
//! draft-4 boolean), `multipleOf`, `minLength`/`maxLength`, `pattern`,
//! `allOf`/`anyOf`/`oneOf`/`not`, `if`/`then`/`else`, `$ref` to `#` or `#/…`,
//! and `definitions`/`$defs` as ref targets. Other keywords are annotations
//! (ignored), except the ones that would change what `$ref` means or needs
//! evaluation state (`$dynamicRef`, `$recursiveRef`, `unevaluated*`…), which
//! are refused.
//!
//! A compiled schema is kept in a bounded process-wide cache keyed by the
//! schema's bytes (`crate::bounded_cache`): the declaration check of a
//! request whose context is not cached yet and the argument check of every
//! call then find the schema compiled, instead of compiling it (and its
//! regexes) each time.
//!
//! `compile` builds the tree, `validate` walks it within the budget, and
//! `limits` holds every bound. This module sits below both `contract` (a host
//! action's parameters are checked when the context is parsed) and `tools`
//! (arguments are checked before a call), and imports neither.

mod compile;
mod limits;
mod validate;

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::bounded_cache::BoundedCache;
use compile::{compile, Node};
use limits::{weighs_at_most, MAX_CACHED_SCHEMAS, MAX_CACHE_WEIGHT};
use validate::{check_against, within};

pub use limits::{
    INLINE_BUDGET, MAX_PATTERNS, MAX_PATTERN_BYTES, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES,
    VALIDATION_BUDGET,
};

/// Checks `schema` as a tool's parameters; the error says what to change.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    compiled(schema).map(|_| ())
}

/// Whether `schema` can be used as a tool's parameters (`check_schema` is ok).
pub fn is_valid_schema(schema: &Value) -> bool {
    check_schema(schema).is_ok()
}

/// Checks `arguments` against `schema`; the error lists what is wrong, for the
/// model to read and retry. Bounded by `VALIDATION_BUDGET` steps.
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    let node =
        compiled(schema).map_err(|error| format!("the tool's schema is unusable: {error}"))?;
    check_against(&node, arguments)
}

/// The check of `check_arguments` when it is certainly cheap: the schema is
/// already compiled (in the cache) and the check ends within
/// `INLINE_BUDGET` steps, for arguments that weigh no more than that. Then
/// the answer is the same as `check_arguments`' (the same walk, stopped
/// sooner), and a caller may run it on its own thread instead of paying a
/// hand-off to the blocking pool; `None` means "use `check_arguments`".
pub fn check_arguments_inline(schema: &Value, arguments: &Value) -> Option<Result<(), String>> {
    if !weighs_at_most(arguments, INLINE_BUDGET) {
        return None;
    }
    let key = serde_json::to_string(schema).ok()?;
    let node = cache().get(&key)?;
    within(&node, arguments, INLINE_BUDGET).ok()
}

/// `schema` compiled, from the cache when it was compiled before.
fn compiled(schema: &Value) -> Result<Arc<Node>, String> {
    // Serialising a `Value` cannot fail (its keys are strings); if it ever
    // did, the schema is compiled uncached.
    let Ok(key) = serde_json::to_string(schema) else {
        return compile(schema).map(|(node, _)| Arc::new(node));
    };
    cache().get_or_make(key, || compile(schema))
}

/// The process's compiled schemas.
fn cache() -> &'static BoundedCache<Node> {
    static CACHE: OnceLock<BoundedCache<Node>> = OnceLock::new();
    CACHE.get_or_init(|| BoundedCache::new(MAX_CACHED_SCHEMAS, MAX_CACHE_WEIGHT))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map};

    use super::limits::MAX_INLINE_STRING_BYTES;
    use super::*;

    #[test]
    fn arguments_missing_a_required_field_are_refused_with_its_name() {
        let schema = json!({"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]});
        let error = check_arguments(&schema, &json!({})).unwrap_err();
        assert!(error.contains("number"), "{error}");
        assert!(check_arguments(&schema, &json!({"number": 4})).is_ok());
        assert!(check_arguments(&schema, &json!({"number": "four"})).is_err());
    }

    /// Every shape that crashed the process through valico is refused when declared.
    #[test]
    fn the_crash_shapes_are_refused_at_declaration() {
        // 1,000-deep `allOf` never gets past the JSON parser (128 levels);
        // the deepest that does is refused here.
        let mut deep = json!({"type": "object"});
        for _ in 0..120 {
            deep = json!({"allOf": [deep]});
        }
        let shapes = [
            json!({"type": "object", "$ref": "#"}),
            json!({"type": "object", "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}),
            json!({"type": "object", "if": {"$ref": "#"}, "then": {}}),
            json!({"type": "object", "dependencies": {"x": {"$ref": "#"}}}),
            deep,
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "a{1000}{1000}{1000}"}}}),
            json!({"type": "object", "patternProperties": {"(x+x+)+y{1000}{1000}": {}}}),
            json!({"type": "object", "properties": {"n": {"multipleOf": 0}}}),
            json!({"type": "object", "properties": {"n": {"multipleOf": -1}}}),
            json!({"type": "object", "$ref": "http://example.com/schema"}),
            json!({"type": "object", "properties": {"a": {"unevaluatedProperties": false}}}),
        ];
        for (i, shape) in shapes.iter().enumerate() {
            assert!(check_schema(shape).is_err(), "accepted shape {i}");
        }
    }

    #[test]
    fn an_acyclic_local_ref_is_inlined() {
        let schema = json!({
            "type": "object",
            "definitions": {"n": {"type": "integer", "minimum": 1}},
            "properties": {"a": {"$ref": "#/definitions/n"}, "b": {"$ref": "#/definitions/n"}}
        });
        assert!(check_arguments(&schema, &json!({"a": 1, "b": 2})).is_ok());
        let error = check_arguments(&schema, &json!({"a": 1, "b": 0})).unwrap_err();
        assert!(error.contains("/b"), "{error}");
    }

    #[test]
    fn an_exponential_ref_fan_out_is_refused_by_size() {
        let mut definitions = Map::new();
        definitions.insert("d0".into(), json!({"type": "integer"}));
        for i in 1..30 {
            let previous = format!("#/definitions/d{}", i - 1);
            definitions.insert(
                format!("d{i}"),
                json!({"allOf": [{"$ref": previous}, {"$ref": previous}]}),
            );
        }
        let schema = json!({"type": "object", "definitions": definitions, "properties": {"x": {"$ref": "#/definitions/d29"}}});
        assert!(check_schema(&schema).is_err());
    }

    #[test]
    fn unique_items_over_many_objects_is_linear_and_bounded() {
        let schema =
            json!({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": true}}});
        // Two steps per item (hashing its two values): past the budget.
        let items: Vec<Value> = (0..120_000).map(|i| json!({"i": i})).collect();
        let error = check_arguments(&schema, &json!({"xs": items})).unwrap_err();
        assert!(error.contains("too large"), "{error}");
        let items: Vec<Value> = (0..1_000).map(|i| json!({"i": i})).collect();
        assert!(check_arguments(&schema, &json!({"xs": items})).is_ok());
        let error = check_arguments(
            &schema,
            &json!({"xs": [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]}),
        )
        .unwrap_err();
        assert!(error.contains("repeats"), "{error}");
    }

    #[test]
    fn common_keywords_validate() {
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": {"enum": ["a", "b"]},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "n": {"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "additionalProperties": false
        });
        assert!(check_arguments(
            &schema,
            &json!({"kind": "a", "code": "ABC", "n": 1.5, "tags": ["x"], "either": 3})
        )
        .is_ok());
        for bad in [
            json!({"kind": "c"}),
            json!({"code": "abc"}),
            json!({"n": 0}),
            json!({"n": 0.3}),
            json!({"tags": ["x", "y", "z"]}),
            json!({"tags": [1]}),
            json!({"extra": 1}),
            json!({"either": 1.5}),
        ] {
            assert!(check_arguments(&schema, &bad).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn patterns_are_counted() {
        let properties: Map<String, Value> = (0..=MAX_PATTERNS)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "pattern": "^a+$"}),
                )
            })
            .collect();
        let schema = json!({"type": "object", "properties": properties});
        assert!(check_schema(&schema).unwrap_err().contains("patterns"));
    }

    /// A schema vetted at declaration is then found in the cache, and a
    /// cached schema answers exactly as one compiled afresh.
    #[test]
    fn a_vetted_then_cached_schema_validates_the_same() {
        let schema = json!({
            "type": "object",
            "properties": {
                "issue": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
                "n": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}}
            },
            "required": ["issue"],
            "additionalProperties": false
        });
        assert!(check_schema(&schema).is_ok());
        let first = compiled(&schema).unwrap();
        let second = compiled(&schema).unwrap();
        assert!(
            Arc::ptr_eq(&first, &second),
            "the second lookup compiled again"
        );
        let (fresh, _) = compile(&schema).unwrap();
        for arguments in [
            json!({"issue": "AR-17"}),
            json!({"issue": "AR-17", "n": 3, "tags": ["a", "b"]}),
            json!({}),
            json!({"issue": "ar17"}),
            json!({"issue": "AR-17", "n": 0, "tags": ["a", "a"], "extra": true}),
            json!([1, 2]),
        ] {
            assert_eq!(
                check_arguments(&schema, &arguments),
                check_against(&fresh, &arguments),
                "{arguments}"
            );
        }
    }

    #[test]
    fn an_inline_check_answers_as_the_full_one_or_not_at_all() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "integer"}}},
            "required": ["n"]
        });
        let small = [json!({"n": 1}), json!({"n": "one"}), json!({})];
        // Not compiled yet: no inline answer.
        assert!(check_arguments_inline(&schema, &small[0]).is_none());
        check_schema(&schema).unwrap();
        for arguments in &small {
            assert_eq!(
                check_arguments_inline(&schema, arguments),
                Some(check_arguments(&schema, arguments)),
                "{arguments}"
            );
        }
        // Past the inline budget, the check is left to the blocking pool.
        let many: Vec<Value> = (0..INLINE_BUDGET).map(|i| json!(i)).collect();
        assert!(check_arguments_inline(&schema, &json!({"n": 1, "xs": many})).is_none());
        let long = "x".repeat(MAX_INLINE_STRING_BYTES + 1);
        assert!(check_arguments_inline(&schema, &json!({"n": 1, "s": long})).is_none());
    }

    #[test]
    fn a_refused_schema_is_refused_every_time() {
        let schema = json!({"type": "object", "$ref": "#"});
        let first = check_schema(&schema).unwrap_err();
        assert_eq!(check_schema(&schema).unwrap_err(), first);
        assert!(check_arguments(&schema, &json!({})).is_err());
    }

    #[test]
    fn a_backtracking_only_pattern_is_refused_with_its_place() {
        let schema =
            json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}});
        let error = check_schema(&schema).unwrap_err();
        assert!(error.contains("#/properties/s/pattern"), "{error}");
    }
}

/// Property tests: any schema-shaped JSON either is refused at declaration
/// or validates any JSON within budget, with no panic and no overflow.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    use super::*;

    /// Arbitrary JSON, up to `depth` levels.
    fn any_json(depth: u32) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e9f64..1e9).prop_map(|n| json!(n)),
            "[a-z0-9 ]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(depth, 64, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    /// Schema-like JSON: keywords with plausible and hostile values, `$ref`s
    /// to the root and to definitions, nested combinators.
    fn any_schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({})),
            Just(json!(true)),
            Just(json!(false)),
            Just(json!({"$ref": "#"})),
            Just(json!({"$ref": "#/definitions/a"})),
            Just(json!({"$ref": "#/nowhere"})),
            Just(json!({"type": "string", "pattern": "^(a+)+$"})),
            Just(json!({"type": "string", "pattern": "(?P<x>"})),
            Just(json!({"multipleOf": 0})),
            Just(json!({"multipleOf": 0.1})),
            Just(json!({"type": "array", "uniqueItems": true})),
            Just(json!({"enum": [1, "a", null]})),
            Just(json!({"minimum": 3, "exclusiveMaximum": 9})),
            Just(json!({"type": ["integer", "null"]})),
        ];
        leaf.prop_recursive(6, 64, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|subs| json!({"allOf": subs})),
                prop::collection::vec(inner.clone(), 1..4).prop_map(|subs| json!({"anyOf": subs})),
                prop::collection::vec(inner.clone(), 1..4).prop_map(|subs| json!({"oneOf": subs})),
                inner.clone().prop_map(|sub| json!({"not": sub})),
                inner.clone().prop_map(|sub| json!({"type": "array", "items": sub})),
                (inner.clone(), inner.clone())
                    .prop_map(|(test, then)| json!({"if": test, "then": then})),
                prop::collection::vec(("[a-c]", inner.clone()), 0..3).prop_map(|pairs| {
                    json!({"type": "object", "properties": pairs.into_iter().collect::<Map<_, _>>()})
                }),
                (inner.clone(), inner)
                    .prop_map(|(root, a)| json!({"definitions": {"a": a}, "allOf": [root]})),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_schema_is_refused_or_checks_any_value_within_budget(
            schema in any_schema(),
            value in any_json(5),
        ) {
            if check_schema(&schema).is_ok() {
                // Either answer is fine; a panic or an overflow is not.
                let _ = check_arguments(&schema, &value);
            }
        }
    }
}
