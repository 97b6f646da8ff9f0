//! Reading the contract's own fields out of a JSON object: each known field
//! may be spelled snake_case or camelCase (`session_id` / `sessionId`), both
//! spellings at once is an error, and any other key is an unknown field. Only
//! contract objects go through here; host-owned maps are never looked into.

use serde_json::{Map, Value};

use super::error::ValidationError;

/// `parent` + `name` as a path: bare at the top level, dotted below it.
pub(crate) fn child_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `parent` + an array index: `attachments[2]`.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// `snake`'s characters in camelCase, one at a time: `session_id` →
/// `sessionId`; a name without `_` is its own camelCase. Field names are ASCII.
fn camel_chars(snake: &str) -> impl Iterator<Item = char> + '_ {
    let mut upper_next = false;
    snake.chars().filter_map(move |c| {
        if c == '_' {
            upper_next = true;
            None
        } else if std::mem::take(&mut upper_next) {
            Some(c.to_ascii_uppercase())
        } else {
            Some(c)
        }
    })
}

/// Whether `key` is `snake` in camelCase (`captured_at` → `capturedAt`).
pub(crate) fn is_camel_of(key: &str, snake: &str) -> bool {
    camel_chars(snake).eq(key.chars())
}

/// The longest piece of a client's value an error message repeats.
const MAX_QUOTED_CHARS: usize = 64;

/// `text` in single quotes for an error message, cut short if long.
pub(crate) fn quoted(text: &str) -> String {
    if text.chars().count() <= MAX_QUOTED_CHARS {
        return format!("'{text}'");
    }
    let start: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    format!("'{start}...'")
}

/// The contract fields of one JSON object, each under its canonical
/// (snake_case) name, checked for unknown keys and double spellings.
pub(crate) struct Fields<'a> {
    /// The object's own path; field paths are built from it.
    path: String,
    /// (canonical name, value as sent), in the order the keys were sent.
    values: Vec<(&'static str, &'a Value)>,
}

impl<'a> Fields<'a> {
    /// Reads `value` as an object whose keys must be among `names` (or their
    /// camelCase spellings).
    pub(crate) fn read(
        value: &'a Value,
        path: &str,
        names: &[&'static str],
    ) -> Result<Fields<'a>, ValidationError> {
        Fields::read_with_aliases(value, path, names, &[])
    }

    /// Like `read`, plus extra spellings: `(alias, canonical)` pairs such as
    /// `("page", "view")`.
    pub(crate) fn read_with_aliases(
        value: &'a Value,
        path: &str,
        names: &[&'static str],
        aliases: &[(&'static str, &'static str)],
    ) -> Result<Fields<'a>, ValidationError> {
        let Some(map) = value.as_object() else {
            return Err(ValidationError::new(path, "expected an object"));
        };
        let mut values: Vec<(&'static str, &'a Value)> = Vec::with_capacity(map.len());
        // The key as sent for each canonical name, to name both in a clash.
        let mut sent_keys: Vec<(&'static str, &'a str)> = Vec::with_capacity(map.len());
        for (key, field_value) in map {
            let Some(name) = canonical_name(key, names, aliases) else {
                return Err(ValidationError::new(child_path(path, key), "unknown field"));
            };
            if let Some((_, earlier)) = sent_keys.iter().find(|(seen, _)| *seen == name) {
                return Err(ValidationError::new(
                    child_path(path, name),
                    format!("given as both {earlier} and {key}"),
                ));
            }
            sent_keys.push((name, key));
            values.push((name, field_value));
        }
        Ok(Fields {
            path: path.to_string(),
            values,
        })
    }

    /// The path of field `name` of this object.
    pub(crate) fn path(&self, name: &str) -> String {
        child_path(&self.path, name)
    }

    /// The object's own path.
    pub(crate) fn own_path(&self) -> &str {
        &self.path
    }

    /// The value as sent, JSON null included.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a Value> {
        self.values
            .iter()
            .find(|(seen, _)| *seen == name)
            .map(|(_, value)| *value)
    }

    /// The value, with JSON null read as absent (every optional field allows null).
    pub(crate) fn value(&self, name: &str) -> Option<&'a Value> {
        self.raw(name).filter(|value| !value.is_null())
    }

    pub(crate) fn str(&self, name: &str) -> Result<Option<&'a str>, ValidationError> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(self.error(name, "expected a string")),
        }
    }

    pub(crate) fn string(&self, name: &str) -> Result<Option<String>, ValidationError> {
        Ok(self.str(name)?.map(str::to_string))
    }

    /// A string of at most `max` characters (Python's `len`: code points).
    pub(crate) fn str_max(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<&'a str>, ValidationError> {
        let text = self.str(name)?;
        if let Some(text) = text {
            self.check_max_chars(name, text, max)?;
        }
        Ok(text)
    }

    /// `str_max`, owned.
    pub(crate) fn string_max(
        &self,
        name: &str,
        max: usize,
    ) -> Result<Option<String>, ValidationError> {
        Ok(self.str_max(name, max)?.map(str::to_string))
    }

    /// Rejects `text` (the value of `name`) when it has more than `max` characters.
    pub(crate) fn check_max_chars(
        &self,
        name: &str,
        text: &str,
        max: usize,
    ) -> Result<(), ValidationError> {
        // Byte length bounds the character count, so most values skip the count.
        if text.len() > max && text.chars().count() > max {
            return Err(self.error(
                name,
                format!(
                    "at most {max} characters are allowed, got {}",
                    text.chars().count()
                ),
            ));
        }
        Ok(())
    }

    /// Rejects an explicit JSON null for a field that has a default but no
    /// "none" (the source of truth's `str = ""`, `dict`, `list`, `Literal`).
    pub(crate) fn reject_null(&self, names: &[&str]) -> Result<(), ValidationError> {
        for name in names {
            if self.raw(name).is_some_and(Value::is_null) {
                return Err(self.error(name, "must not be null"));
            }
        }
        Ok(())
    }

    /// A string that must be present.
    pub(crate) fn required_str(&self, name: &str) -> Result<&'a str, ValidationError> {
        match self.str(name)? {
            Some(text) => Ok(text),
            None => Err(self.error(name, "is required")),
        }
    }

    /// A string that must be present and non-empty.
    pub(crate) fn required_non_empty_str(&self, name: &str) -> Result<&'a str, ValidationError> {
        let text = self.required_str(name)?;
        if text.is_empty() {
            return Err(self.error(name, "must not be empty"));
        }
        Ok(text)
    }

    /// An array of at most `max` items; absent reads as empty.
    pub(crate) fn array(&self, name: &str, max: usize) -> Result<&'a [Value], ValidationError> {
        match self.value(name) {
            None => Ok(&[]),
            Some(Value::Array(items)) if items.len() > max => Err(self.error(
                name,
                format!("at most {max} items are allowed, got {}", items.len()),
            )),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.error(name, "expected an array")),
        }
    }

    pub(crate) fn object(
        &self,
        name: &str,
    ) -> Result<Option<&'a Map<String, Value>>, ValidationError> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(_) => Err(self.error(name, "expected an object")),
        }
    }

    /// A non-negative integer that fits in `u32`.
    pub(crate) fn u32(&self, name: &str) -> Result<Option<u32>, ValidationError> {
        let Some(value) = self.value(name) else {
            return Ok(None);
        };
        match value.as_u64().map(u32::try_from) {
            Some(Ok(number)) => Ok(Some(number)),
            Some(Err(_)) => Err(self.error(name, format!("must be at most {}", u32::MAX))),
            None => Err(self.error(name, "expected a non-negative integer")),
        }
    }

    pub(crate) fn f64(&self, name: &str) -> Result<Option<f64>, ValidationError> {
        match self.value(name) {
            None => Ok(None),
            Some(value) => match value.as_f64() {
                Some(number) => Ok(Some(number)),
                None => Err(self.error(name, "expected a number")),
            },
        }
    }

    /// One of a closed set of string values, e.g. `image`, `document`, `text`.
    pub(crate) fn one_of<T: Copy>(
        &self,
        name: &str,
        choices: &[(&str, T)],
    ) -> Result<Option<T>, ValidationError> {
        let Some(text) = self.str(name)? else {
            return Ok(None);
        };
        match choices.iter().find(|(wire, _)| *wire == text) {
            Some((_, choice)) => Ok(Some(*choice)),
            None => {
                let expected: Vec<&str> = choices.iter().map(|(wire, _)| *wire).collect();
                Err(self.error(
                    name,
                    format!(
                        "unknown value {}; expected one of {}",
                        quoted(text),
                        expected.join(", ")
                    ),
                ))
            }
        }
    }

    /// An error at field `name` of this object.
    pub(crate) fn error(&self, name: &str, message: impl Into<String>) -> ValidationError {
        ValidationError::new(self.path(name), message)
    }
}

/// The canonical name `key` spells, if it is one of `names` or an alias.
fn canonical_name(
    key: &str,
    names: &[&'static str],
    aliases: &[(&'static str, &'static str)],
) -> Option<&'static str> {
    if let Some(name) = names
        .iter()
        // Compared character by character: this runs for every key of
        // every request, and building each camelCase name allocated.
        .find(|name| **name == key || camel_chars(name).eq(key.chars()))
    {
        return Some(name);
    }
    aliases
        .iter()
        .find(|(alias, _)| *alias == key)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn camel_case_capitalises_after_each_underscore() {
        let camel_case = |snake| camel_chars(snake).collect::<String>();
        assert_eq!(camel_case("session_id"), "sessionId");
        assert_eq!(camel_case("data_uri"), "dataUri");
        assert_eq!(camel_case("id"), "id");
    }

    #[test]
    fn quoted_values_are_cut_after_64_characters() {
        assert_eq!(quoted("gpt"), "'gpt'");
        assert_eq!(quoted(&"a".repeat(100)), format!("'{}...'", "a".repeat(64)));
    }

    #[test]
    fn paths_are_bare_at_the_top_and_dotted_below() {
        assert_eq!(child_path("", "id"), "id");
        assert_eq!(child_path("host_context", "view"), "host_context.view");
        assert_eq!(index_path("attachments", 2), "attachments[2]");
    }

    #[test]
    fn both_spellings_of_one_field_are_rejected_at_its_path() {
        let value = json!({"dataUri": "a", "data_uri": "b"});
        let err = Fields::read(&value, "attachments[0]", &["data_uri"])
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "attachments[0].data_uri: given as both dataUri and data_uri"
        );
    }

    #[test]
    fn aliases_map_to_their_canonical_name() {
        let value = json!({"page": {"name": "x"}});
        let fields =
            Fields::read_with_aliases(&value, "host_context", &["view"], &[("page", "view")])
                .unwrap();
        assert_eq!(fields.value("view"), Some(&json!({"name": "x"})));
    }

    #[test]
    fn null_reads_as_absent_but_raw_keeps_it() {
        let value = json!({"tool_result": null});
        let fields = Fields::read(&value, "", &["tool_result"]).unwrap();
        assert_eq!(fields.value("tool_result"), None);
        assert_eq!(fields.raw("tool_result"), Some(&Value::Null));
    }
}
