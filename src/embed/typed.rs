//! Typed tools: an async function of arguments the host declares as a Rust
//! type (`#[derive(Deserialize, JsonSchema)]`). The JSON schema the model
//! sees is derived from that type by `schemars` and checked at startup by
//! the same bounded validator as a hand-written one; the turn checks each
//! call's arguments against it before the function runs, so a bad value is
//! a tool error naming the field, never a panic. The function gets the
//! host's state through [`State`], and its error type converts into the
//! result's `error` / `error_code` ([`ToolError`]).

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use actors::tools::{Tool, ToolContext, ToolError, ToolFuture};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The host's shared state as a typed tool receives it, in the spirit of
/// `actix_web::web::Data`: registered once with
/// [`AssistantDefinition::state`](crate::embed::AssistantDefinition::state),
/// dereferences to `T`, and is cheap to clone.
#[derive(Debug)]
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> State<T> {
        State(self.0.clone())
    }
}

impl<T: ?Sized> std::ops::Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Any + Send + Sync> State<T> {
    /// The state the definition registered, from a call's context.
    fn from_context(context: &ToolContext) -> Option<State<T>> {
        let deps = context.deps.clone()?;
        deps.downcast::<T>().ok().map(State)
    }
}

/// A tool made from an async function of typed arguments and the host's
/// state: `TypedTool::new("order_status", "Look up an order.", order_status)`
/// where `async fn order_status(args: OrderArgs, shop: State<Shop>) -> Result<Order, ShopError>`.
///
/// ```
/// use assistant_runtime::embed::{State, TypedTool};
/// use actors::tools::ToolError;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct OrderArgs { order_id: String }
///
/// #[derive(Serialize)]
/// struct Order { order_id: String, status: &'static str }
///
/// struct Shop;
///
/// async fn order_status(args: OrderArgs, _shop: State<Shop>) -> Result<Order, ToolError> {
///     Ok(Order { order_id: args.order_id, status: "shipped" })
/// }
///
/// let tool = TypedTool::new("order_status", "Look up an order by its id.", order_status);
/// ```
pub struct TypedTool<A, S, F> {
    name: String,
    description: String,
    parameters: Value,
    invalidates: Vec<String>,
    function: F,
    types: PhantomData<fn(A, S)>,
}

impl<A, S, F, Fut, R, E> TypedTool<A, S, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    S: Any + Send + Sync,
    F: Fn(A, State<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: Serialize,
    E: Into<ToolError>,
{
    /// A tool named `name` (1..64 letters, digits, `_` or `-`), described to
    /// the model by `description`, whose arguments' schema is `A`'s.
    pub fn new(name: impl Into<String>, description: impl Into<String>, function: F) -> Self {
        TypedTool {
            name: name.into(),
            description: description.into(),
            parameters: parameters_of::<A>(),
            invalidates: Vec::new(),
            function,
            types: PhantomData,
        }
    }

    /// What a successful call invalidates on the host (echoed in `tool_result`).
    pub fn invalidates(mut self, keys: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.invalidates = keys.into_iter().map(Into::into).collect();
        self
    }
}

/// `A`'s JSON schema as a tool's parameters: the `$schema` and `title`
/// annotations are dropped (providers read the object, not the draft).
pub fn parameters_of<A: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(A).to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

impl<A, S, F, Fut, R, E> Tool for TypedTool<A, S, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    S: Any + Send + Sync,
    F: Fn(A, State<S>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: Serialize,
    E: Into<ToolError>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn invalidates(&self) -> Vec<String> {
        self.invalidates.clone()
    }

    fn call(&self, arguments: Value, context: ToolContext) -> ToolFuture {
        // The schema check passed; what serde still refuses (a value the
        // schema cannot express) is the model's mistake, named for a retry.
        let arguments = match serde_json::from_value::<A>(arguments) {
            Ok(arguments) => arguments,
            Err(error) => {
                let error = ToolError::new("invalid_arguments", error.to_string());
                return Box::pin(async move { Err(error) });
            }
        };
        let Some(state) = State::<S>::from_context(&context) else {
            let error = ToolError::new(
                "no_state",
                format!(
                    "the host registered no {} state for this tool",
                    std::any::type_name::<S>()
                ),
            );
            return Box::pin(async move { Err(error) });
        };
        let future = (self.function)(arguments, state);
        Box::pin(async move {
            let output = future.await.map_err(Into::into)?;
            serde_json::to_value(output)
                .map_err(|error| ToolError::new("invalid_output", error.to_string()))
        })
    }
}
