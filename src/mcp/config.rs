//! `MCP_CONFIG_PATH`: the common `{"mcpServers": {"<name>": ...}}` file. A
//! server is `{"command", "args", "env"}` (stdio, a child process) or
//! `{"url", "headers"}` (streamable HTTP). A missing file means no servers;
//! anything else wrong is a startup error naming the server and field.

use std::collections::BTreeMap;

use serde_json::Value;

/// Where an MCP server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One configured server; `name` prefixes its tools (`<name>_<tool>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
}

impl McpServerConfig {
    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "streamable_http",
        }
    }
}

/// Parses the file's text; servers come back in name order.
pub fn parse(text: &str) -> Result<Vec<McpServerConfig>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| format!("not valid JSON: {error}"))?;
    let Some(servers) = value.get("mcpServers") else {
        return Err("expected an object with \"mcpServers\"".to_string());
    };
    let Some(servers) = servers.as_object() else {
        return Err("mcpServers: expected an object of servers".to_string());
    };
    let mut parsed: Vec<McpServerConfig> = servers
        .iter()
        .map(|(name, server)| parse_server(name, server))
        .collect::<Result<_, _>>()?;
    parsed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(parsed)
}

fn parse_server(name: &str, server: &Value) -> Result<McpServerConfig, String> {
    let at = |field: &str| format!("mcpServers.{name}.{field}");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "mcpServers.{name}: a server name is letters, digits, '-' and '_' (it prefixes tool names)"
        ));
    }
    let Some(object) = server.as_object() else {
        return Err(format!("mcpServers.{name}: expected an object"));
    };
    for key in object.keys() {
        if !["command", "args", "env", "url", "headers", "type"].contains(&key.as_str()) {
            return Err(format!("{}: unknown field", at(key)));
        }
    }
    let strings = |field: &str| -> Result<BTreeMap<String, String>, String> {
        match object.get(field) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(key, value)| match value.as_str() {
                    Some(text) => Ok((key.clone(), text.to_string())),
                    None => Err(format!("{}.{key}: expected a string", at(field))),
                })
                .collect(),
            Some(_) => Err(format!("{}: expected an object of strings", at(field))),
        }
    };
    match (object.get("command"), object.get("url")) {
        (Some(command), None) => {
            let command = command
                .as_str()
                .filter(|command| !command.trim().is_empty())
                .ok_or_else(|| format!("{}: expected a non-empty string", at("command")))?;
            let args = match object.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| format!("{}: expected strings", at("args")))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(format!("{}: expected an array of strings", at("args"))),
            };
            Ok(McpServerConfig {
                name: name.to_string(),
                transport: McpTransport::Stdio {
                    command: command.to_string(),
                    args,
                    env: strings("env")?,
                },
            })
        }
        (None, Some(url)) => {
            let url = url
                .as_str()
                .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
                .ok_or_else(|| format!("{}: expected an http(s) URL", at("url")))?;
            Ok(McpServerConfig {
                name: name.to_string(),
                transport: McpTransport::Http {
                    url: url.to_string(),
                    headers: strings("headers")?,
                },
            })
        }
        (Some(_), Some(_)) => Err(format!(
            "mcpServers.{name}: give either command (stdio) or url (streamable HTTP), not both"
        )),
        (None, None) => Err(format!(
            "mcpServers.{name}: expected command (stdio) or url (streamable HTTP)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_transports_parse_in_name_order() {
        let servers = parse(
            r#"{"mcpServers": {
                "zeta": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}},
                "alpha": {"command": "server", "args": ["--stdio"], "env": {"A": "1"}}
            }}"#,
        )
        .unwrap();
        assert_eq!(servers[0].name, "alpha");
        assert_eq!(servers[0].transport_name(), "stdio");
        assert_eq!(servers[1].transport_name(), "streamable_http");
    }

    #[test]
    fn mistakes_name_the_server_and_field() {
        let error = parse(r#"{"mcpServers": {"s": {"command": 3}}}"#).unwrap_err();
        assert!(error.contains("mcpServers.s.command"), "{error}");
        let error = parse(r#"{"mcpServers": {"s": {"url": "ftp://x"}}}"#).unwrap_err();
        assert!(error.contains("mcpServers.s.url"), "{error}");
        let error = parse(r#"{"mcpServers": {"bad name": {"command": "x"}}}"#).unwrap_err();
        assert!(error.contains("bad name"), "{error}");
        assert!(parse("[]").is_err());
    }
}
