//! The prefix the assistant's routes are mounted under, read by the pages
//! that point at other routes (the playground, `/docs`, `/openapi.json`).

/// Where the assistant's routes are mounted: empty for the standalone
/// server, `/assistant` for a host's `assistant.scope("/assistant")`. The
/// playground, the API docs page and the OpenAPI document read it, so
/// that what they point at follows the prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountPrefix(pub String);

impl MountPrefix {
    /// The prefix, `""` when not mounted under one.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
