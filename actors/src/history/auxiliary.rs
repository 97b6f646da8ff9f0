//! One auxiliary model call (a summary, a memory update): sent through the
//! same `ModelClient` as a turn, read to the end, its text and usage returned.

use futures_util::StreamExt;

use crate::conversation::Usage;
use crate::model::pricing::price_for;
use crate::model::{
    ChatItem, ContentPart, ModelEvent, ModelId, ModelRequest, ModelSettings, Purpose,
    SharedModelClient,
};

/// A model to call for auxiliary work.
#[derive(Clone)]
pub struct AuxiliaryModel {
    pub id: ModelId,
    pub client: SharedModelClient,
}

impl std::fmt::Debug for AuxiliaryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuxiliaryModel({})", self.id)
    }
}

impl AuxiliaryModel {
    /// Sends `instructions` as the system prompt and `input` as the one user
    /// message, for `purpose`; returns the reply's text and the call's usage.
    pub async fn complete(
        &self,
        purpose: Purpose,
        instructions: &str,
        input: String,
    ) -> Result<(String, Usage), String> {
        let request = ModelRequest {
            model: self.id.clone(),
            system: instructions.into(),
            messages: vec![ChatItem::User(vec![ContentPart::Text(input)])].into(),
            tools: Vec::new(),
            settings: ModelSettings::default(),
            purpose,
        };
        let mut stream = self.client.stream(request);
        let mut text = String::new();
        let mut usage = Usage {
            requests: 1,
            ..Usage::default()
        };
        let price = price_for(&self.id);
        while let Some(event) = stream.next().await {
            match event.map_err(|error| error.to_string())? {
                ModelEvent::TextDelta(delta) => text.push_str(&delta),
                ModelEvent::Usage(tokens) => {
                    usage.add_tokens(tokens.input_tokens, tokens.output_tokens);
                    if let Some(price) = price {
                        let cost = usage.cost_usd.unwrap_or(0.0) + price.cost_usd(&tokens);
                        usage.cost_usd = Some((cost * 1e9).round() / 1e9);
                    }
                }
                ModelEvent::ThinkingDelta(_)
                | ModelEvent::ThinkingSignature(_)
                | ModelEvent::ToolCall { .. } => {}
            }
        }
        if text.trim().is_empty() {
            return Err(format!("{} returned no text", self.id));
        }
        Ok((text, usage))
    }
}
