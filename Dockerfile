# syntax=docker/dockerfile:1
# assistant-runtime in stages: plan and build the dependencies once
# (cargo-chef: a layer that changes only with Cargo.toml / Cargo.lock), build
# the server binary on top, then copy it alone into a slim Debian image (no
# compiler, no load generators, no test clients).
#
#   docker build -t assistant-runtime .
#   docker run --rm -p 127.0.0.1:7100:7100 assistant-runtime   # builtin:echo, in memory
#   docker compose up                                          # with PostgreSQL (compose.yaml)
#
# Inside the container the runtime listens on every interface; publish it on
# loopback (as above and in compose.yaml) unless ACCESS__MODE is header/jwt
# or ACCESS__LOCAL_TOKEN is set: in trusted_local mode every caller is an admin.

FROM rust:1.95-bookworm AS chef
RUN cargo install cargo-chef --locked
WORKDIR /src

FROM chef AS planner
COPY . .
# The recipe: the workspace's manifests and lock file, sources left out.
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# The dependency layer: reused until the recipe changes, so a source change
# compiles only the workspace's own crates.
RUN cargo chef cook --release --locked --recipe-path recipe.json --bin assistant-runtime
COPY . .
RUN cargo build --release --locked --bin assistant-runtime \
 && strip target/release/assistant-runtime

FROM debian:bookworm-slim AS runtime
# The system's CA roots, which the model clients trust besides their bundled
# roots: an operator may add a company CA here (update-ca-certificates), or per
# provider with LLM__PROVIDERS__<NAME>__CA_FILE. Left unpinned on purpose: the
# current ones are the point. A numeric user, so orchestrators that check
# runAsNonRoot can tell.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin assistant
WORKDIR /app
COPY --from=build /src/target/release/assistant-runtime /usr/local/bin/assistant-runtime
COPY config/default.env config/default.env
USER 10001
# Listen on every interface inside the container; publish with -p.
ENV SERVER__HOST=0.0.0.0 \
    SERVER__PORT=7100
EXPOSE 7100
# The binary asks its own /readyz (the image has no curl).
HEALTHCHECK --interval=10s --timeout=6s --start-period=20s --retries=3 \
    CMD ["assistant-runtime", "healthcheck"]
ENTRYPOINT ["assistant-runtime"]
CMD ["serve"]
