# assistant-runtime in two stages: build the server binary with the Rust
# toolchain, then copy it alone into a slim Debian image (no compiler, no
# load generators, no test clients).
#
#   docker build -t assistant-runtime .
#   docker run --rm -p 7100:7100 assistant-runtime          # builtin:echo, in memory
#   docker compose up                                      # with PostgreSQL (compose.yaml)

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin assistant-runtime \
 && strip target/release/assistant-runtime

FROM debian:bookworm-slim AS runtime
# The system's CA roots, which the model clients trust besides their bundled
# roots: an operator may add a company CA here (update-ca-certificates), or per
# provider with LLM__PROVIDERS__<NAME>__CA_FILE.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home-dir /app --shell /usr/sbin/nologin assistant
WORKDIR /app
COPY --from=build /src/target/release/assistant-runtime /usr/local/bin/assistant-runtime
COPY config/default.env config/default.env
USER assistant
# Listen on every interface inside the container; publish with -p.
ENV SERVER__HOST=0.0.0.0 \
    SERVER__PORT=7100
EXPOSE 7100
ENTRYPOINT ["assistant-runtime"]
CMD ["serve"]
