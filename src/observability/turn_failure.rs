//! One WARN line for a turn that failed (a provider's refusal or outage, a
//! timeout, the runtime's own fault): its `error_type`, the message (for a
//! provider, the provider's own words) and the `request_id`, so the access
//! log's `POST /api/chat 500` can be explained. Each transport calls it with
//! the turn's final response; cancelled and usage-limited turns are normal
//! endings and are not logged here.

use actors::error_type::ErrorType;
use actors::events::FinalResponse;

use super::RequestId;

/// Logs `final_response` when it is a failure.
pub fn log_if_failed(request_id: Option<&RequestId>, final_response: &FinalResponse) {
    let Some(error_type) = final_response.error_type.as_deref() else {
        return;
    };
    if ErrorType::parse(error_type).is_some_and(ErrorType::is_saved_ending) {
        return;
    }
    let request_id = request_id.map_or("-", RequestId::as_str);
    log::warn!(
        "turn failed: error_type={error_type} session={} request_id={request_id} model={}: {}",
        final_response.session_id,
        final_response.model,
        final_response
            .error_message
            .as_deref()
            .unwrap_or("(no message)"),
    );
}
