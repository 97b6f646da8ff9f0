//! Checking a value against a compiled schema: every problem found (at most
//! `MAX_PROBLEMS`), each named by its JSON pointer, within a step budget.
//! Running out of steps stops the check at once: a failed check the model
//! can retry, never a pinned thread.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::compile::Node;
use super::limits::{weight, MAX_PROBLEMS, VALIDATION_BUDGET};

/// Checks `arguments` against a compiled schema, within `VALIDATION_BUDGET`.
pub(super) fn check_against(node: &Node, arguments: &Value) -> Result<(), String> {
    match within(node, arguments, VALIDATION_BUDGET) {
        Err(Exhausted) => Err(format!(
            "the arguments are too large to check against this schema (more than {VALIDATION_BUDGET} steps); send fewer or smaller values"
        )),
        Ok(checked) => checked,
    }
}

/// The check's answer, or `Exhausted` if it needs more than `budget` steps.
pub(super) fn within(
    node: &Node,
    arguments: &Value,
    budget: u64,
) -> Result<Result<(), String>, Exhausted> {
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

/// The budget ran out; the check stops at once.
pub(super) struct Exhausted;

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
