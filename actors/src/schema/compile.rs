//! Compiling a declared schema into a finite tree of `Node`s: every local
//! `$ref` inlined (a cycle refused), every regex built by the linear-time
//! `regex` crate, and the whole bounded in depth, size and patterns
//! (`super::limits`). A schema that compiles can be checked against any
//! value within a step budget (`super::validate`).

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use super::limits::{
    MAX_PATTERNS, MAX_PATTERN_BYTES, MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, REGEX_SIZE_LIMIT,
};

/// Keywords that need machinery this validator refuses to have.
const REFUSED_KEYWORDS: &[&str] = &[
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// A compiled schema: a finite tree, every `$ref` already inlined.
#[derive(Default)]
pub(super) struct Node {
    /// `false` schema: nothing matches.
    pub(super) never: bool,
    pub(super) types: Option<Vec<String>>,
    pub(super) enumeration: Option<Vec<Value>>,
    pub(super) constant: Option<Value>,
    pub(super) properties: Vec<(String, Node)>,
    pub(super) pattern_properties: Vec<(Regex, Node)>,
    pub(super) additional_properties: Option<Box<Node>>,
    pub(super) required: Vec<String>,
    pub(super) property_names: Option<Box<Node>>,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    pub(super) dependent_required: Vec<(String, Vec<String>)>,
    pub(super) dependent_schemas: Vec<(String, Node)>,
    pub(super) items: Option<Box<Node>>,
    pub(super) prefix_items: Vec<Node>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    pub(super) contains: Option<Box<Node>>,
    pub(super) minimum: Option<f64>,
    pub(super) maximum: Option<f64>,
    pub(super) exclusive_minimum: Option<f64>,
    pub(super) exclusive_maximum: Option<f64>,
    pub(super) multiple_of: Option<f64>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) pattern: Option<Regex>,
    pub(super) all_of: Vec<Node>,
    pub(super) any_of: Vec<Node>,
    pub(super) one_of: Vec<Node>,
    pub(super) not: Option<Box<Node>>,
    pub(super) conditional: Option<Box<Conditional>>,
}

pub(super) struct Conditional {
    pub(super) test: Node,
    pub(super) then: Option<Node>,
    pub(super) otherwise: Option<Node>,
}

/// The compiled schema and `weight_of` it.
pub(super) fn compile(schema: &Value) -> Result<(Node, usize), String> {
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
