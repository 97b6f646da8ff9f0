//! `GET /openapi.json`: a hand-kept OpenAPI 3.1 document of the HTTP routes.

use actix_web::HttpResponse;
use serde_json::{json, Value};

pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(document())
}

fn error_responses() -> Value {
    json!({
        "409": {"description": "session_error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        "422": {"description": "validation", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        "503": {"description": "database unreachable", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    })
}

fn session_param() -> Value {
    json!({"name": "session_id", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1, "maxLength": 64}})
}

pub fn document() -> Value {
    let ok = |description: &str| json!({"200": {"description": description}});
    let with_errors = |mut responses: Value| {
        if let (Some(map), Value::Object(errors)) = (responses.as_object_mut(), error_responses()) {
            map.extend(errors);
        }
        responses
    };
    json!({
        "openapi": "3.1.0",
        "info": {"title": "assistant-runtime", "version": env!("CARGO_PKG_VERSION")},
        "paths": {
            "/health": {"get": {"summary": "Health of the runtime and its components", "responses": {"200": {"description": "healthy"}, "503": {"description": "unhealthy"}}}},
            "/api/chat": {"post": {"summary": "Run a turn (non-streaming)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/MessageBody"}}}},
                "responses": with_errors(json!({"200": {"description": "final response"}, "500": {"description": "the turn failed; type is its error_type"}}))}},
            "/api/chat/{session_id}/cancel": {"post": {"summary": "Cancel the live turn", "parameters": [session_param()], "responses": ok("{cancel_requested}")}},
            "/api/agui": {"post": {"summary": "AG-UI RunAgentInput in, Server-Sent Events out", "responses": ok("event stream")}},
            "/api/sessions": {"get": {"summary": "List sessions", "parameters": [
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}}], "responses": with_errors(ok("sessions"))}},
            "/api/sessions/{session_id}": {
                "get": {"summary": "Session summary with pending_action", "parameters": [session_param()], "responses": with_errors(json!({"200": {"description": "session"}, "404": {"description": "unknown session"}}))},
                "delete": {"summary": "Delete a session", "parameters": [session_param()], "responses": with_errors(json!({"200": {"description": "deleted"}, "404": {"description": "unknown session"}}))}},
            "/api/sessions/{session_id}/messages": {"get": {"summary": "Root-to-leaf path", "parameters": [session_param(),
                {"name": "leaf_id", "in": "query", "schema": {"type": "string"}}], "responses": with_errors(ok("messages"))}},
            "/api/sessions/{session_id}/tree": {"get": {"summary": "Every message with parent_id", "parameters": [session_param()], "responses": with_errors(ok("messages"))}},
            "/api/sessions/{session_id}/repair": {"post": {"summary": "Resolve the pending action and calls without a result as unknown", "parameters": [session_param()], "responses": with_errors(ok("session"))}},
            "/api/debug/tools": {"get": {"summary": "The tool registry", "responses": ok("tools")}},
            "/api/debug/prompt": {"get": {"summary": "The composed system prompt and its profile parts", "responses": ok("prompt")}},
            "/api/models": {"get": {"summary": "Configured providers and the default model", "responses": ok("models")}}
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error", "type"], "properties": {"error": {"type": "string"}, "type": {"type": "string"}}},
            "MessageBody": {"type": "object", "required": ["id", "session_id"], "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 64},
                "session_id": {"type": "string", "minLength": 1, "maxLength": 64},
                "content": {"type": "string"},
                "parent_id": {"type": "string"},
                "message_type": {"enum": ["standard", "steering"]},
                "output_mode": {"enum": ["text", "host_tools"]},
                "attachments": {"type": "array", "maxItems": 16},
                "images": {"type": "array", "items": {"type": "string"}},
                "screenshot": {"type": "string"},
                "host_context": {"type": "object"},
                "config": {"type": "object", "properties": {
                    "default_model": {"type": "string"}, "thinking_budget": {"type": "integer"},
                    "temperature": {"type": "number"}, "max_turns": {"type": "integer"}}},
                "tool_call_id": {"type": "string"},
                "tool_result": {},
                "tool_outcome": {"enum": ["success", "failed"]}
            }}
        }}
    })
}
