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

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use crate::bounded_cache::BoundedCache;

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
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Steps one argument check may spend (a step is a schema node applied to a
/// value, an item hashed for `uniqueItems`, or 256 bytes matched by a regex).
pub const VALIDATION_BUDGET: u64 = 200_000;
/// At most this many problems are reported to the model.
const MAX_PROBLEMS: usize = 20;
/// Steps a check may take on the caller's thread (`check_arguments_inline`):
/// a few microseconds, less than handing the check to the blocking pool.
pub const INLINE_BUDGET: u64 = 256;
/// Longest string (or key) `check_arguments_inline` accepts in the arguments.
const MAX_INLINE_STRING_BYTES: usize = 4_096;
/// Most compiled schemas kept by the cache.
const MAX_CACHED_SCHEMAS: usize = 1_024;
/// Most memory, estimated, that cached schemas hold (see `weight_of`); one
/// schema may take a quarter of it, so a schema of up to 15 patterns is kept.
const MAX_CACHE_WEIGHT: usize = 64 << 20;

/// Keywords that need machinery this validator refuses to have.
const REFUSED_KEYWORDS: &[&str] = &[
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "unevaluatedProperties",
    "unevaluatedItems",
];

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

/// Checks `arguments` against a compiled schema, within `VALIDATION_BUDGET`.
fn check_against(node: &Node, arguments: &Value) -> Result<(), String> {
    match within(node, arguments, VALIDATION_BUDGET) {
        Err(Exhausted) => Err(format!(
            "the arguments are too large to check against this schema (more than {VALIDATION_BUDGET} steps); send fewer or smaller values"
        )),
        Ok(checked) => checked,
    }
}

/// The check's answer, or `Exhausted` if it needs more than `budget` steps.
fn within(node: &Node, arguments: &Value, budget: u64) -> Result<Result<(), String>, Exhausted> {
    let mut run = Run {
        steps_left: budget,
        problems: Vec::new(),
    };
    node.validate(arguments, "", &mut run)?;
    if run.problems.is_empty() {
        return Ok(Ok(()));
    }
    Ok(Err(run.problems.join("; ")))
}

/// Whether `value` has at most `limit` JSON values in it, none a string
/// longer than `MAX_INLINE_STRING_BYTES` (stops at the first excess, so a
/// large value costs no more to refuse than a small one).
fn weighs_at_most(value: &Value, limit: u64) -> bool {
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

/// A compiled schema: a finite tree, every `$ref` already inlined.
#[derive(Default)]
struct Node {
    /// `false` schema: nothing matches.
    never: bool,
    types: Option<Vec<String>>,
    enumeration: Option<Vec<Value>>,
    constant: Option<Value>,
    properties: Vec<(String, Node)>,
    pattern_properties: Vec<(Regex, Node)>,
    additional_properties: Option<Box<Node>>,
    required: Vec<String>,
    property_names: Option<Box<Node>>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    dependent_required: Vec<(String, Vec<String>)>,
    dependent_schemas: Vec<(String, Node)>,
    items: Option<Box<Node>>,
    prefix_items: Vec<Node>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    contains: Option<Box<Node>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Regex>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    conditional: Option<Box<Conditional>>,
}

struct Conditional {
    test: Node,
    then: Option<Node>,
    otherwise: Option<Node>,
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

/// The compiled schema and `weight_of` it.
fn compile(schema: &Value) -> Result<(Node, usize), String> {
    let mut compiler = Compiler {
        root: schema,
        nodes: 0,
        patterns: 0,
        ref_stack: Vec::new(),
    };
    let node = compiler.node(schema, "#", 0)?;
    Ok((node, weight_of(&compiler)))
}

/// An upper estimate of a compiled schema's memory beyond its source bytes:
/// each subschema's `Node`, and for each regex the most its program may take
/// (`REGEX_SIZE_LIMIT`; simple patterns take a few KiB). Values copied from
/// the schema (`enum`, `const`, names) are counted by the key's bytes.
fn weight_of(compiler: &Compiler) -> usize {
    compiler.nodes * std::mem::size_of::<Node>() + compiler.patterns * REGEX_SIZE_LIMIT
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: usize,
    /// Regexes compiled so far, each `$ref` use counted.
    patterns: usize,
    /// The `$ref` targets being inlined, outermost first: a repeat is a cycle.
    ref_stack: Vec<String>,
}

impl<'a> Compiler<'a> {
    fn node(&mut self, schema: &'a Value, at: &str, depth: usize) -> Result<Node, String> {
        self.nodes += 1;
        if self.nodes > MAX_SCHEMA_NODES {
            return Err(format!(
                "has more than {MAX_SCHEMA_NODES} subschemas (counting each $ref use)"
            ));
        }
        if depth > MAX_SCHEMA_DEPTH {
            return Err(format!(
                "{at}: subschemas nest more than {MAX_SCHEMA_DEPTH} deep (counting each $ref use)"
            ));
        }
        let object = match schema {
            Value::Bool(true) => return Ok(Node::default()),
            Value::Bool(false) => {
                return Ok(Node {
                    never: true,
                    ..Node::default()
                })
            }
            Value::Object(object) => object,
            _ => return Err(format!("{at}: a schema must be an object or a boolean")),
        };
        let mut node = Node::default();
        for keyword in REFUSED_KEYWORDS {
            if object.contains_key(*keyword) {
                return Err(format!("{at}: {keyword} is not supported"));
            }
        }
        let child = |key: &str| format!("{at}/{key}");
        if let Some(reference) = object.get("$ref") {
            let target = self.reference(reference, at)?;
            node.all_of
                .push(target_node(self, target, reference, depth)?);
        }
        if let Some(types) = object.get("type") {
            node.types = Some(type_names(types, &child("type"))?);
        }
        if let Some(values) = object.get("enum") {
            match values {
                Value::Array(values) => node.enumeration = Some(values.clone()),
                _ => return Err(format!("{}: expected an array", child("enum"))),
            }
        }
        node.constant = object.get("const").cloned();
        if let Some(properties) = object.get("properties") {
            for (name, sub) in as_object(properties, &child("properties"))? {
                let sub = self.node(sub, &format!("{at}/properties/{name}"), depth + 1)?;
                node.properties.push((name.clone(), sub));
            }
        }
        if let Some(patterns) = object.get("patternProperties") {
            for (pattern, sub) in as_object(patterns, &child("patternProperties"))? {
                let regex = self.regex(pattern, &child("patternProperties"))?;
                let sub = self.node(sub, &format!("{at}/patternProperties"), depth + 1)?;
                node.pattern_properties.push((regex, sub));
            }
        }
        node.additional_properties = self.optional(object, "additionalProperties", at, depth)?;
        if let Some(required) = object.get("required") {
            node.required = string_list(required, &child("required"))?;
        }
        node.property_names = self.optional(object, "propertyNames", at, depth)?;
        node.min_properties = count(object, "minProperties", at)?;
        node.max_properties = count(object, "maxProperties", at)?;
        for key in ["dependencies", "dependentRequired", "dependentSchemas"] {
            let Some(dependencies) = object.get(key) else {
                continue;
            };
            for (name, dependency) in as_object(dependencies, &child(key))? {
                let dependency_at = format!("{at}/{key}/{name}");
                if dependency.is_array() {
                    let names = string_list(dependency, &dependency_at)?;
                    node.dependent_required.push((name.clone(), names));
                } else {
                    let sub = self.node(dependency, &dependency_at, depth + 1)?;
                    node.dependent_schemas.push((name.clone(), sub));
                }
            }
        }
        match object.get("items") {
            None => {}
            Some(Value::Array(tuple)) => {
                for (i, sub) in tuple.iter().enumerate() {
                    let sub = self.node(sub, &format!("{at}/items/{i}"), depth + 1)?;
                    node.prefix_items.push(sub);
                }
                node.items = self.optional(object, "additionalItems", at, depth)?;
            }
            Some(items) => {
                node.items = Some(Box::new(self.node(items, &child("items"), depth + 1)?));
            }
        }
        if let Some(prefix) = object.get("prefixItems") {
            if !node.prefix_items.is_empty() {
                return Err(format!("{at}: use either prefixItems or an items array"));
            }
            for (i, sub) in as_array(prefix, &child("prefixItems"))?.iter().enumerate() {
                let sub = self.node(sub, &format!("{at}/prefixItems/{i}"), depth + 1)?;
                node.prefix_items.push(sub);
            }
        }
        node.min_items = count(object, "minItems", at)?;
        node.max_items = count(object, "maxItems", at)?;
        node.unique_items = match object.get("uniqueItems") {
            None => false,
            Some(Value::Bool(unique)) => *unique,
            Some(_) => return Err(format!("{}: expected a boolean", child("uniqueItems"))),
        };
        node.contains = self.optional(object, "contains", at, depth)?;
        node.minimum = number(object, "minimum", at)?;
        node.maximum = number(object, "maximum", at)?;
        for (key, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            let exclusive = match object.get(key) {
                None | Some(Value::Bool(false)) => None,
                // Draft 4: a boolean that makes the plain bound exclusive.
                Some(Value::Bool(true)) => number(object, bound, at)?,
                Some(_) => number(object, key, at)?,
            };
            if key == "exclusiveMinimum" {
                node.exclusive_minimum = exclusive;
            } else {
                node.exclusive_maximum = exclusive;
            }
        }
        node.multiple_of = number(object, "multipleOf", at)?;
        if let Some(divisor) = node.multiple_of {
            if divisor <= 0.0 {
                return Err(format!("{}: must be greater than 0", child("multipleOf")));
            }
        }
        node.min_length = count(object, "minLength", at)?;
        node.max_length = count(object, "maxLength", at)?;
        if let Some(pattern) = object.get("pattern") {
            let Some(pattern) = pattern.as_str() else {
                return Err(format!("{}: expected a string", child("pattern")));
            };
            node.pattern = Some(self.regex(pattern, &child("pattern"))?);
        }
        for (key, list) in [("allOf", 0), ("anyOf", 1), ("oneOf", 2)] {
            let Some(subs) = object.get(key) else {
                continue;
            };
            let subs = as_array(subs, &child(key))?;
            if subs.is_empty() {
                return Err(format!("{}: must not be empty", child(key)));
            }
            for (i, sub) in subs.iter().enumerate() {
                let sub = self.node(sub, &format!("{at}/{key}/{i}"), depth + 1)?;
                match list {
                    0 => node.all_of.push(sub),
                    1 => node.any_of.push(sub),
                    _ => node.one_of.push(sub),
                }
            }
        }
        node.not = self.optional(object, "not", at, depth)?;
        if let Some(test) = object.get("if") {
            let test = self.node(test, &child("if"), depth + 1)?;
            let then = self.optional(object, "then", at, depth)?.map(|node| *node);
            let otherwise = self.optional(object, "else", at, depth)?.map(|node| *node);
            node.conditional = Some(Box::new(Conditional {
                test,
                then,
                otherwise,
            }));
        }
        Ok(node)
    }

    fn regex(&mut self, pattern: &str, at: &str) -> Result<Regex, String> {
        self.patterns += 1;
        if self.patterns > MAX_PATTERNS {
            return Err(format!(
                "{at}: more than {MAX_PATTERNS} patterns (counting each $ref use)"
            ));
        }
        build_regex(pattern, at)
    }

    fn optional(
        &mut self,
        object: &'a Map<String, Value>,
        key: &str,
        at: &str,
        depth: usize,
    ) -> Result<Option<Box<Node>>, String> {
        match object.get(key) {
            None => Ok(None),
            Some(sub) => Ok(Some(Box::new(self.node(
                sub,
                &format!("{at}/{key}"),
                depth + 1,
            )?))),
        }
    }

    /// Resolves a local `$ref` (`#` or a JSON pointer `#/…`) in the root.
    fn reference(&self, reference: &Value, at: &str) -> Result<&'a Value, String> {
        let Some(reference) = reference.as_str() else {
            return Err(format!("{at}/$ref: expected a string"));
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(format!(
                "{at}/$ref: {reference:?} points outside the schema; only \"#\" and \"#/…\" are allowed"
            ));
        };
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!(
                "{at}/$ref: {reference:?} is not a JSON pointer; anchors are not supported"
            ));
        }
        let pointer = percent_decode(pointer);
        self.root
            .pointer(&pointer)
            .ok_or_else(|| format!("{at}/$ref: {reference:?} does not resolve in the schema"))
    }
}

/// Compiles a `$ref` target, refusing a cycle (a target already being inlined).
fn target_node<'a>(
    compiler: &mut Compiler<'a>,
    target: &'a Value,
    reference: &Value,
    depth: usize,
) -> Result<Node, String> {
    let name = reference.as_str().unwrap_or_default().to_string();
    if compiler.ref_stack.contains(&name) {
        let mut chain = compiler.ref_stack.clone();
        chain.push(name);
        return Err(format!(
            "$ref cycle {}: recursive schemas are not supported",
            chain.join(" → ")
        ));
    }
    compiler.ref_stack.push(name.clone());
    let node = compiler.node(target, &name, depth + 1);
    compiler.ref_stack.pop();
    node
}

/// `~1` and `~0` are the pointer's own escapes; `%xx` those of the URI fragment.
fn percent_decode(pointer: &str) -> String {
    let bytes = pointer.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = pointer.get(i + 1..i + 3).unwrap_or_default();
            if let (2, Ok(byte)) = (hex.len(), u8::from_str_radix(hex, 16)) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn build_regex(pattern: &str, at: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "{at}: the pattern is {} bytes; the limit is {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|error| format!("{at}: the pattern is not supported: {error}"))
}

const TYPE_NAMES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

fn type_names(types: &Value, at: &str) -> Result<Vec<String>, String> {
    let names = match types {
        Value::String(name) => vec![name.clone()],
        Value::Array(_) => string_list(types, at)?,
        _ => return Err(format!("{at}: expected a type name or a list of them")),
    };
    for name in &names {
        if !TYPE_NAMES.contains(&name.as_str()) {
            return Err(format!("{at}: unknown type {name:?}"));
        }
    }
    Ok(names)
}

fn as_object<'v>(value: &'v Value, at: &str) -> Result<&'v Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object"))
}

fn as_array<'v>(value: &'v Value, at: &str) -> Result<&'v Vec<Value>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("{at}: expected an array"))
}

fn string_list(value: &Value, at: &str) -> Result<Vec<String>, String> {
    as_array(value, at)?
        .iter()
        .map(|name| {
            name.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{at}: expected a list of strings"))
        })
        .collect()
}

fn count(object: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>, String> {
    match object.get(key) {
        None => Ok(None),
        Some(value) => match value.as_u64() {
            Some(count) => Ok(Some(count)),
            // 3.0 is a valid count in JSON Schema.
            None => match value.as_f64() {
                Some(float) if float >= 0.0 && float.fract() == 0.0 && float < 1e15 => {
                    Ok(Some(float as u64))
                }
                _ => Err(format!("{at}/{key}: expected a non-negative integer")),
            },
        },
    }
}

fn number(object: &Map<String, Value>, key: &str, at: &str) -> Result<Option<f64>, String> {
    match object.get(key) {
        None => Ok(None),
        Some(value) => match value.as_f64() {
            Some(number) if number.is_finite() => Ok(Some(number)),
            _ => Err(format!("{at}/{key}: expected a number")),
        },
    }
}

/// The budget ran out; the check stops at once.
struct Exhausted;

struct Run {
    steps_left: u64,
    problems: Vec<String>,
}

impl Run {
    fn spend(&mut self, steps: u64) -> Result<(), Exhausted> {
        if self.steps_left < steps {
            self.steps_left = 0;
            return Err(Exhausted);
        }
        self.steps_left -= steps;
        Ok(())
    }

    fn problem(&mut self, path: &str, message: String) {
        if self.problems.len() < MAX_PROBLEMS {
            let path = if path.is_empty() { "/" } else { path };
            self.problems.push(format!("{path}: {message}"));
        }
    }

    /// Whether `value` matches `node`, spending from the same budget.
    fn matches(&mut self, node: &Node, value: &Value, path: &str) -> Result<bool, Exhausted> {
        let mut trial = Run {
            steps_left: self.steps_left,
            problems: Vec::new(),
        };
        let outcome = node.validate(value, path, &mut trial);
        self.steps_left = trial.steps_left;
        outcome?;
        Ok(trial.problems.is_empty())
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Number(_) => "number",
        Value::String(_) => "string",
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "integer" => value
            .as_f64()
            .is_some_and(|number| number.fract() == 0.0 && number.is_finite()),
        _ => type_of(value) == name,
    }
}

/// JSON equality that ignores key order and `1` vs `1.0`.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(key, x)| ys.get(key).is_some_and(|y| same(x, y)))
        }
        _ => a == b,
    }
}

/// A canonical text of `value` (sorted keys, numbers as f64) for `uniqueItems`.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Number(number) => out.push_str(&format!("{:?}", number.as_f64().unwrap_or(0.0))),
        Value::Array(items) => {
            out.push('[');
            for item in items {
                canonical(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            out.push('{');
            for key in keys {
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&object[key], out);
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// How many steps handling `value` as a whole costs (its JSON size / 256).
fn weight(value: &Value) -> u64 {
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

impl Node {
    fn validate(&self, value: &Value, path: &str, run: &mut Run) -> Result<(), Exhausted> {
        run.spend(1)?;
        if self.never {
            run.problem(path, "no value is allowed here".to_string());
            return Ok(());
        }
        if let Some(types) = &self.types {
            if !types.iter().any(|name| has_type(value, name)) {
                run.problem(
                    path,
                    format!("expected {}, got {}", types.join(" or "), type_of(value)),
                );
                return Ok(());
            }
        }
        if let Some(options) = &self.enumeration {
            run.spend(options.len() as u64 + weight(value))?;
            if !options.iter().any(|option| same(option, value)) {
                run.problem(path, "is not one of the allowed values".to_string());
            }
        }
        if let Some(constant) = &self.constant {
            run.spend(weight(value))?;
            if !same(constant, value) {
                run.problem(path, format!("must be {constant}"));
            }
        }
        match value {
            Value::Object(object) => self.validate_object(value, object, path, run)?,
            Value::Array(items) => self.validate_array(items, path, run)?,
            Value::String(text) => self.validate_string(text, path, run)?,
            Value::Number(number) => self.validate_number(number.as_f64(), path, run),
            _ => {}
        }
        for sub in &self.all_of {
            sub.validate(value, path, run)?;
        }
        if !self.any_of.is_empty() {
            let mut any = false;
            for sub in &self.any_of {
                if run.matches(sub, value, path)? {
                    any = true;
                    break;
                }
            }
            if !any {
                run.problem(path, "matches none of anyOf".to_string());
            }
        }
        if !self.one_of.is_empty() {
            let mut n_matching = 0;
            for sub in &self.one_of {
                if run.matches(sub, value, path)? {
                    n_matching += 1;
                }
            }
            if n_matching != 1 {
                run.problem(
                    path,
                    format!("must match exactly one of oneOf, matches {n_matching}"),
                );
            }
        }
        if let Some(not) = &self.not {
            if run.matches(not, value, path)? {
                run.problem(path, "matches the schema in not".to_string());
            }
        }
        if let Some(conditional) = &self.conditional {
            let branch = if run.matches(&conditional.test, value, path)? {
                &conditional.then
            } else {
                &conditional.otherwise
            };
            if let Some(branch) = branch {
                branch.validate(value, path, run)?;
            }
        }
        Ok(())
    }

    fn validate_object(
        &self,
        value: &Value,
        object: &Map<String, Value>,
        path: &str,
        run: &mut Run,
    ) -> Result<(), Exhausted> {
        for name in &self.required {
            if !object.contains_key(name) {
                run.problem(path, format!("missing required property {name:?}"));
            }
        }
        let n = object.len() as u64;
        if self.min_properties.is_some_and(|min| n < min) {
            run.problem(path, format!("has {n} properties, too few"));
        }
        if self.max_properties.is_some_and(|max| n > max) {
            run.problem(path, format!("has {n} properties, too many"));
        }
        for (name, needs) in &self.dependent_required {
            if object.contains_key(name) {
                for need in needs {
                    if !object.contains_key(need) {
                        run.problem(path, format!("{name:?} requires {need:?}"));
                    }
                }
            }
        }
        for (name, sub) in &self.dependent_schemas {
            if object.contains_key(name) {
                sub.validate(value, path, run)?;
            }
        }
        let checks_members = !self.properties.is_empty()
            || !self.pattern_properties.is_empty()
            || self.additional_properties.is_some()
            || self.property_names.is_some();
        if !checks_members {
            return Ok(());
        }
        for (name, member) in object {
            run.spend(1 + name.len() as u64 / 256)?;
            let member_path = format!("{path}/{name}");
            if let Some(names) = &self.property_names {
                names.validate(&Value::String(name.clone()), &member_path, run)?;
            }
            let mut matched = false;
            if let Some((_, sub)) = self.properties.iter().find(|(known, _)| known == name) {
                matched = true;
                sub.validate(member, &member_path, run)?;
            }
            for (regex, sub) in &self.pattern_properties {
                if regex.is_match(name) {
                    matched = true;
                    sub.validate(member, &member_path, run)?;
                }
            }
            if !matched {
                if let Some(additional) = &self.additional_properties {
                    if additional.never {
                        run.problem(&member_path, "is not an allowed property".to_string());
                    } else {
                        additional.validate(member, &member_path, run)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn validate_array(&self, items: &[Value], path: &str, run: &mut Run) -> Result<(), Exhausted> {
        let n = items.len() as u64;
        if self.min_items.is_some_and(|min| n < min) {
            run.problem(path, format!("has {n} items, too few"));
        }
        if self.max_items.is_some_and(|max| n > max) {
            run.problem(path, format!("has {n} items, too many"));
        }
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}/{i}");
            match self.prefix_items.get(i) {
                Some(sub) => sub.validate(item, &item_path, run)?,
                // `items` past a tuple holds `additionalItems` (see compile).
                None => {
                    if let Some(sub) = &self.items {
                        sub.validate(item, &item_path, run)?;
                    }
                }
            }
        }
        if self.unique_items {
            let mut seen = HashSet::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                run.spend(weight(item))?;
                let mut text = String::new();
                canonical(item, &mut text);
                if !seen.insert(text) {
                    run.problem(
                        &format!("{path}/{i}"),
                        "repeats an earlier item".to_string(),
                    );
                    break;
                }
            }
        }
        if let Some(contains) = &self.contains {
            let mut any = false;
            for (i, item) in items.iter().enumerate() {
                if run.matches(contains, item, &format!("{path}/{i}"))? {
                    any = true;
                    break;
                }
            }
            if !any {
                run.problem(path, "contains no matching item".to_string());
            }
        }
        Ok(())
    }

    fn validate_string(&self, text: &str, path: &str, run: &mut Run) -> Result<(), Exhausted> {
        if self.min_length.is_some() || self.max_length.is_some() {
            run.spend(1 + text.len() as u64 / 256)?;
            let n = text.chars().count() as u64;
            if self.min_length.is_some_and(|min| n < min) {
                run.problem(path, format!("is {n} characters, too short"));
            }
            if self.max_length.is_some_and(|max| n > max) {
                run.problem(path, format!("is {n} characters, too long"));
            }
        }
        if let Some(pattern) = &self.pattern {
            run.spend(1 + text.len() as u64 / 256)?;
            if !pattern.is_match(text) {
                run.problem(
                    path,
                    format!("does not match the pattern {}", pattern.as_str()),
                );
            }
        }
        Ok(())
    }

    fn validate_number(&self, number: Option<f64>, path: &str, run: &mut Run) {
        let Some(number) = number else {
            return;
        };
        if self.minimum.is_some_and(|min| number < min) {
            run.problem(path, format!("{number} is below the minimum"));
        }
        if self.maximum.is_some_and(|max| number > max) {
            run.problem(path, format!("{number} is above the maximum"));
        }
        if self.exclusive_minimum.is_some_and(|min| number <= min) {
            run.problem(path, format!("{number} is not above the exclusive minimum"));
        }
        if self.exclusive_maximum.is_some_and(|max| number >= max) {
            run.problem(path, format!("{number} is not below the exclusive maximum"));
        }
        if let Some(divisor) = self.multiple_of {
            let quotient = number / divisor;
            let off = (quotient - quotient.round()).abs();
            if !quotient.is_finite() || off > 1e-9 * quotient.abs().max(1.0) {
                run.problem(path, format!("{number} is not a multiple of {divisor}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
