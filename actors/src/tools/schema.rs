//! JSON schema checks of tool arguments, through valico.

use serde_json::Value;
use valico::json_schema;

/// Checks `arguments` against `schema`; the error lists what is wrong, for the
/// model to read and retry.
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    let mut scope = json_schema::Scope::new();
    let compiled = match scope.compile_and_return(schema.clone(), false) {
        Ok(compiled) => compiled,
        Err(error) => return Err(format!("the tool's schema does not compile: {error:?}")),
    };
    let state = compiled.validate(arguments);
    if state.is_strictly_valid() {
        return Ok(());
    }
    let mut problems: Vec<String> = state
        .errors
        .iter()
        .map(|error| {
            let path = error.get_path();
            let path = if path.is_empty() { "/" } else { path };
            match error.get_detail() {
                Some(detail) => format!("{path}: {} ({detail})", error.get_title()),
                None => format!("{path}: {}", error.get_title()),
            }
        })
        .collect();
    if problems.is_empty() {
        problems.push("the arguments reference schemas that could not be resolved".to_string());
    }
    Err(problems.join("; "))
}

/// Whether `schema` compiles as a JSON schema.
pub fn is_valid_schema(schema: &Value) -> bool {
    json_schema::Scope::new()
        .compile_and_return(schema.clone(), false)
        .is_ok()
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
}
