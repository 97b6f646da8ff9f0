//! Library half of the `assistant-runtime` server binary: everything the binary
//! wires together lives here so the black-box tests in `tests/api/` can build it.
//!
//! Layout:
//! - [`socketio`]: the Socket.IO v5 / Engine.IO v4 transport (polling, websocket,
//!   upgrade, namespaces). It knows nothing of sessions or turns; the
//!   `/assistant` namespace handler is plugged in through [`socketio::NamespaceHandler`].

pub mod socketio;
