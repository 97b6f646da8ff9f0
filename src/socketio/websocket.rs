//! The websocket transport: the handshake for a new session or an upgrade, the
//! reader task that turns frames into messages for the connection actor, and
//! the writer/body pair that carries the actor's frames out. The request's
//! payload is not `Send`, so reading stays on the worker that accepted it.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll as TaskPoll};
use std::time::Duration;

use actix_codec::Framed;
use actix_http::body::{BodySize, BoxBody, MessageBody};
use actix_http::{h1, ConnectionType, HttpMessage, Request, Response, StatusCode};
use actix_service::boxed::RcService;
use actix_service::Service;
use actix_web::rt::net::TcpStream;
use actix_web::HttpResponseBuilder;
use tokio::io::AsyncWriteExt;

use actix::{Actor, Addr};
use actix_http::ws::{CloseCode, CloseReason, OpCode, Parser};
use actix_web::web::{Bytes, BytesMut, Payload};
use actix_web::{HttpRequest, HttpResponse};
use futures_util::{Stream, StreamExt};

use super::connection::{AttachProbe, Connection, ConnectionLink, Transport, WsClosed, WsText};
use super::engine_packet::{open_packet, EngineError};
use super::frame_channel::{self, Receiver, Sender, WeakSender};
use super::namespace::DisconnectReason;
use super::{sid, Shared};

/// Above this, an emptied read buffer is given back rather than kept for an
/// idle connection (idle memory matters more than one reallocation).
const IDLE_READ_BUFFER_BYTES: usize = 4096;

/// Sends websocket frames to one client. The channel is unbounded; its
/// backlog is counted in `ConnectionLink` and capped by the actor instead.
pub(crate) struct WsWriter {
    tx: Sender,
    link: Arc<ConnectionLink>,
}

impl WsWriter {
    pub(crate) fn new(tx: Sender, link: Arc<ConnectionLink>) -> WsWriter {
        WsWriter { tx, link }
    }

    /// Sends one Engine.IO packet as a text frame.
    pub(crate) fn send_text(&mut self, text: &str) {
        let mut frame = BytesMut::with_capacity(text.len() + 10);
        Parser::write_message(&mut frame, text, OpCode::Text, true, false);
        self.send_frame(frame.freeze());
    }

    /// Sends a close frame; the body ends once every writer is dropped.
    pub(crate) fn close(&mut self) {
        let mut frame = BytesMut::with_capacity(4);
        let reason = CloseReason::from(CloseCode::Normal);
        Parser::write_close(&mut frame, Some(reason), false);
        self.send_frame(frame.freeze());
    }

    fn send_frame(&mut self, frame: Bytes) {
        let n_bytes = frame.len();
        if self.tx.send(frame).is_ok() {
            self.link.add_transport(n_bytes);
        }
    }
}

/// The streaming body of the 101 response: the frames written by the actor.
struct WsBody {
    rx: Receiver,
    link: Arc<ConnectionLink>,
}

impl Stream for WsBody {
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> TaskPoll<Option<Self::Item>> {
        match self.rx.poll_recv(cx) {
            TaskPoll::Ready(Some(frame)) => {
                self.link.release_transport(frame.len());
                TaskPoll::Ready(Some(Ok(frame)))
            }
            TaskPoll::Ready(None) => TaskPoll::Ready(None),
            TaskPoll::Pending => TaskPoll::Pending,
        }
    }
}

/// Checks the upgrade request and builds the 101 answer, with actix-http's
/// own handshake (method, `Upgrade`, `Connection`, version and key checks,
/// and `Sec-WebSocket-Accept`).
fn handshake(req: &HttpRequest) -> Result<HttpResponseBuilder, actix_http::ws::HandshakeError> {
    let answer = actix_http::ws::handshake(req.head())?.finish();
    let mut response = HttpResponse::build(answer.status());
    response.upgrade("websocket");
    if let Some(accept) = answer
        .headers()
        .get(actix_http::header::SEC_WEBSOCKET_ACCEPT)
    {
        response.insert_header((actix_http::header::SEC_WEBSOCKET_ACCEPT, accept.clone()));
    }
    Ok(response)
}

/// `transport=websocket` without sid: a new session that starts on websocket.
pub(crate) fn open(req: &HttpRequest, payload: Payload, shared: &Arc<Shared>) -> HttpResponse {
    let response = match handshake(req) {
        Ok(response) => response,
        Err(_) => return EngineError::BadRequest.response(),
    };
    let config = &shared.config;
    let link = Arc::new(ConnectionLink::new(config.queue_limit_bytes()));
    let (mut writer, body) = channel(&link);
    let sid: Arc<str> = Arc::from(sid::new_id());
    writer.send_text(&open_packet(
        &sid,
        &[],
        config.ping_interval,
        config.ping_timeout,
        config.max_payload,
    ));
    let pong_tx = writer.tx.downgrade();
    let addr = Connection::new(
        sid.clone(),
        shared.clone(),
        link.clone(),
        Transport::WebSocket(writer),
    )
    .with_handshake(super::kept_headers(req, config))
    .start();
    shared.register(sid, addr.clone(), shared.config.client_address(req));
    let reader = FrameReader::new(addr, pong_tx, link, config.max_payload);
    start(req, response, payload, reader, body)
}

/// `transport=websocket&sid=..`: a probe for upgrading a polling session.
pub(crate) async fn upgrade(
    req: &HttpRequest,
    payload: Payload,
    shared: &Arc<Shared>,
    addr: Addr<Connection>,
) -> HttpResponse {
    let response = match handshake(req) {
        Ok(response) => response,
        Err(_) => return EngineError::BadRequest.response(),
    };
    let (tx, rx) = frame_channel::channel();
    let pong_tx = tx.downgrade();
    // The probe shares the session's counters, so its backlog counts too.
    let link = match addr.send(AttachProbe { tx }).await {
        Ok(Ok(link)) => link,
        Ok(Err(error)) => return error.response(),
        Err(_) => return EngineError::SessionIdUnknown.response(),
    };
    let body = WsBody {
        rx,
        link: link.clone(),
    };
    let reader = FrameReader::new(addr, pong_tx, link, shared.config.max_payload);
    start(req, response, payload, reader, body)
}

/// Runs the websocket: over the socket itself when the request came through
/// [`serve_upgrade`] (the HTTP dispatcher and its buffers are gone by then),
/// otherwise over the request payload and a streaming response body.
fn start(
    req: &HttpRequest,
    mut response: HttpResponseBuilder,
    payload: Payload,
    reader: FrameReader,
    body: WsBody,
) -> HttpResponse {
    let slot = req.extensions().get::<TakeoverSlot>().cloned();
    match slot {
        Some(slot) => {
            *slot.0.borrow_mut() = Some(Takeover { reader, body });
            response.finish()
        }
        None => {
            actix_web::rt::spawn(read_frames(payload, reader));
            response.streaming(body)
        }
    }
}

fn channel(link: &Arc<ConnectionLink>) -> (WsWriter, WsBody) {
    let (tx, rx) = frame_channel::channel();
    let writer = WsWriter {
        tx,
        link: link.clone(),
    };
    let body = WsBody {
        rx,
        link: link.clone(),
    };
    (writer, body)
}

/// Parses frames and hands their messages to the connection actor; fed by
/// [`read_frames`] (request payload) or [`read_socket`] (a taken socket).
struct FrameReader {
    buf: BytesMut,
    /// A fragmented text message being reassembled.
    fragments: Option<BytesMut>,
    addr: Addr<Connection>,
    pong_tx: WeakSender,
    link: Arc<ConnectionLink>,
    max_payload: usize,
}

/// What to do after the buffered frames were handled.
enum Step {
    /// Read more.
    More,
    /// The websocket is over; tell the actor why.
    Stop(DisconnectReason),
    /// The actor is gone; nobody to tell.
    ActorGone,
}

impl FrameReader {
    fn new(
        addr: Addr<Connection>,
        pong_tx: WeakSender,
        link: Arc<ConnectionLink>,
        max_payload: usize,
    ) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            fragments: None,
            addr,
            pong_tx,
            link,
            max_payload,
        }
    }

    /// Handles every complete frame in `buf`, answering websocket pings itself
    /// and forwarding text messages to the actor one at a time (the
    /// `send().await` is the backpressure: a flooding client waits for its own
    /// actor).
    async fn handle_buffered(&mut self) -> Step {
        let max_payload = self.max_payload;
        loop {
            let (finished, opcode, data) = match Parser::parse(&mut self.buf, true, max_payload) {
                Ok(Some(frame)) => frame,
                Ok(None) => return Step::More,
                Err(actix_http::ws::ProtocolError::Overflow) => {
                    return Step::Stop(DisconnectReason::PayloadTooLarge)
                }
                Err(_) => return Step::Stop(DisconnectReason::TransportError),
            };
            let data = data.unwrap_or_default();
            let text = match (opcode, finished) {
                (OpCode::Text, true) if self.fragments.is_none() => data,
                (OpCode::Text, false) if self.fragments.is_none() => {
                    self.fragments = Some(data);
                    continue;
                }
                (OpCode::Continue, _) => {
                    let Some(partial) = self.fragments.as_mut() else {
                        return Step::Stop(DisconnectReason::TransportError);
                    };
                    if partial.len() + data.len() > max_payload {
                        return Step::Stop(DisconnectReason::PayloadTooLarge);
                    }
                    partial.extend_from_slice(&data);
                    if !finished {
                        continue;
                    }
                    match self.fragments.take() {
                        Some(whole) => whole,
                        None => continue,
                    }
                }
                // Binary attachments are not supported; skip them.
                (OpCode::Binary, _) => continue,
                (OpCode::Ping, _) => {
                    if let Some(tx) = self.pong_tx.upgrade() {
                        let mut frame = BytesMut::with_capacity(data.len() + 2);
                        Parser::write_message(&mut frame, &data, OpCode::Pong, true, false);
                        let frame = frame.freeze();
                        let n_bytes = frame.len();
                        if tx.send(frame).is_ok() {
                            self.link.add_transport(n_bytes);
                        }
                    }
                    continue;
                }
                (OpCode::Pong, _) => continue,
                (OpCode::Close, _) => return Step::Stop(DisconnectReason::TransportClose),
                _ => return Step::Stop(DisconnectReason::TransportError),
            };
            let text = match String::from_utf8(Vec::from(text)) {
                Ok(text) => text,
                Err(_) => return Step::Stop(DisconnectReason::ParseError),
            };
            if self.addr.send(WsText { text }).await.is_err() {
                return Step::ActorGone;
            }
        }
    }
}

/// Tells the actor why its websocket ended (nobody, if the actor is gone).
fn report(addr: &Addr<Connection>, step: Step) {
    if let Step::Stop(reason) = step {
        addr.do_send(WsClosed { reason });
    }
}

/// Reads the request payload until the peer closes.
async fn read_frames(mut payload: Payload, mut reader: FrameReader) {
    let step = loop {
        match reader.handle_buffered().await {
            Step::More => {}
            step => break step,
        }
        if reader.buf.is_empty() && reader.buf.capacity() > IDLE_READ_BUFFER_BYTES {
            reader.buf = BytesMut::new();
        }
        match payload.next().await {
            Some(Ok(chunk)) => reader.buf.extend_from_slice(&chunk),
            Some(Err(_)) | None => break Step::Stop(DisconnectReason::TransportClose),
        }
    };
    report(&reader.addr, step);
}

/// Request extension put by [`serve_upgrade`]: the handler leaves the
/// websocket here instead of streaming it through the HTTP dispatcher.
#[derive(Clone, Default)]
pub(crate) struct TakeoverSlot(Rc<RefCell<Option<Takeover>>>);

/// A websocket whose 101 answer is being sent, to run over the socket.
pub(crate) struct Takeover {
    reader: FrameReader,
    body: WsBody,
}

/// Bytes read from a taken socket at a time.
const SOCKET_READ_BYTES: usize = 4096;

/// Queued frames are joined into one write up to about this size.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// How long one direction of a taken socket may outlive the other (a close
/// frame still to write, or the peer's close still to read).
const LINGER: Duration = Duration::from_secs(1);

/// The actix-web app as one boxed service, called by [`serve_upgrade`].
pub type AppService = RcService<Request, Response<BoxBody>, actix_web::Error>;

/// The `HttpService::upgrade` service: every request with `Connection:
/// upgrade` comes here with the connection. It goes through `app` like any
/// request; a websocket the app accepted then runs on the socket itself, so
/// the HTTP dispatcher's two 8 KiB buffers are freed. Any other answer is
/// written out and the connection closed.
pub async fn serve_upgrade(
    app: AppService,
    req: Request,
    mut framed: Framed<TcpStream, h1::Codec>,
) -> Result<(), actix_web::Error> {
    let slot = TakeoverSlot::default();
    req.extensions_mut().insert(slot.clone());
    let response = match app.call(req).await {
        Ok(response) => response,
        Err(error) => error.error_response().into(),
    };
    let (mut head, body) = response.into_parts();
    let takeover = slot.0.borrow_mut().take();
    match takeover {
        Some(takeover) if head.status() == StatusCode::SWITCHING_PROTOCOLS => {
            head.head_mut().set_connection_type(ConnectionType::Upgrade);
            write_item(&mut framed, h1::Message::Item((head, BodySize::None))).await?;
            let parts = framed.into_parts();
            let mut reader = takeover.reader;
            // Frames the client sent right behind its request.
            reader.buf = BytesMut::from(&parts.read_buf[..]);
            drop(parts.read_buf);
            drop(parts.write_buf);
            // A task of its own, so that the HTTP dispatcher's task (sized
            // for every state of an HTTP/1 connection, over a KiB) ends here
            // and an idle socket keeps only this smaller one.
            actix_web::rt::spawn(run_socket(parts.io, reader, takeover.body));
            Ok(())
        }
        _ => {
            head.head_mut().set_connection_type(ConnectionType::Close);
            let size = body.size();
            write_item(&mut framed, h1::Message::Item((head, size))).await?;
            let mut body = std::pin::pin!(body);
            while let Some(chunk) = poll_fn(|cx| body.as_mut().poll_next(cx)).await {
                let chunk = chunk.map_err(|error| io::Error::other(error.to_string()))?;
                write_item(&mut framed, h1::Message::Chunk(Some(chunk))).await?;
            }
            write_item(&mut framed, h1::Message::Chunk(None)).await?;
            Ok(())
        }
    }
}

type H1Item = h1::Message<(Response<()>, BodySize)>;

async fn write_item(framed: &mut Framed<TcpStream, h1::Codec>, item: H1Item) -> io::Result<()> {
    Pin::new(&mut *framed).write(item)?;
    poll_fn(|cx| Pin::new(&mut *framed).flush::<H1Item>(cx)).await
}

/// One websocket over its own socket: the reader and the writer of the
/// actor's frames, in this one task.
async fn run_socket(mut io: TcpStream, mut reader: FrameReader, mut body: WsBody) {
    let addr = reader.addr.clone();
    {
        let (read_half, mut write_half) = io.split();
        let read = read_socket(read_half.as_ref(), &mut reader);
        let write = async {
            while let Some(frame) = body.rx.recv().await {
                body.link.release_transport(frame.len());
                // Frames queued meanwhile go out in the same write.
                let mut batch: Option<BytesMut> = None;
                while let Some(next) = body.rx.try_recv() {
                    body.link.release_transport(next.len());
                    let batch = batch.get_or_insert_with(|| {
                        let mut batch = BytesMut::with_capacity(frame.len() + next.len());
                        batch.extend_from_slice(&frame);
                        batch
                    });
                    batch.extend_from_slice(&next);
                    if batch.len() >= WRITE_BATCH_BYTES {
                        break;
                    }
                }
                let written = match &batch {
                    Some(batch) => write_half.write_all(batch).await,
                    None => write_half.write_all(&frame).await,
                };
                if written.is_err() {
                    return;
                }
            }
            let _ = write_half.shutdown().await;
        };
        tokio::pin!(read, write);
        tokio::select! {
            step = &mut read => {
                // Tell the actor first: the writer ends only when the actor,
                // told, drops its end (after its close frame). Told after the
                // linger instead, it would hear of a refused frame a second late.
                report(&addr, step);
                let _ = tokio::time::timeout(LINGER, &mut write).await;
            }
            () = &mut write => {
                let step = tokio::time::timeout(LINGER, &mut read)
                    .await
                    .unwrap_or(Step::ActorGone);
                report(&addr, step);
            }
        }
    }
}

/// Reads a taken socket until the peer closes. An idle connection holds no
/// read buffer.
async fn read_socket(io: &TcpStream, reader: &mut FrameReader) -> Step {
    loop {
        match reader.handle_buffered().await {
            Step::More => {}
            step => return step,
        }
        if reader.buf.is_empty() {
            reader.buf = BytesMut::new();
        }
        if io.readable().await.is_err() {
            return Step::Stop(DisconnectReason::TransportClose);
        }
        reader.buf.reserve(SOCKET_READ_BYTES);
        match io.try_read_buf(&mut reader.buf) {
            Ok(0) => return Step::Stop(DisconnectReason::TransportClose),
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Step::Stop(DisconnectReason::TransportClose),
        }
    }
}
