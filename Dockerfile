# Arbor container image.
#
#   docker build -t arbor .
#   docker run -d -p 8080:8080 -v arbor-data:/data arbor
#   docker run --rm -v arbor-data:/data arbor migrate status     # any other subcommand
#
# PostgreSQL instead of SQLite: add -e ARBOR_DATABASE_URL=postgres://user:pass@host:5432/arbor
#
# Three stages: a Rust builder that compiles the single `arbor` binary (templates and static
# assets are embedded at build time), a Debian stage that gathers the binary with what it needs
# to run, and the image itself: FROM scratch holding only that.

# ---------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------
# The full (non-slim) image already has gcc and make, which is all the C code in the tree needs
# (ring, zstd-sys and the bundled libsqlite3); no OpenSSL or other -dev packages are required.
# Bookworm to match the runtime stage: the binary links glibc dynamically, so the builder's
# glibc must not be newer than the runtime's. The exact toolchain that wrote link/code-order.txt:
# its names carry a hash of the compiler's version, so another version lays nothing out
# (scripts/check-dockerfile compares the two).
FROM rust:1.95.0-bookworm AS builder

WORKDIR /src

# --- Dependency layer: rebuilt only when the manifests or the lock file change. --------------
# Only the manifests are copied, plus throw-away stub sources, so that compiling the ~550
# dependencies lands in its own cached layer and an edit to src/ does not redo it.
# (rust-toolchain.toml is deliberately not copied: the image's toolchain is the pinned one and
# rustup must not try to download another.)
COPY Cargo.toml Cargo.lock ./
# .cargo/config.toml sets the flags the bundled SQLite is compiled with and jemalloc's settings.
COPY .cargo ./.cargo
COPY migration/Cargo.toml migration/
# A stub build.rs makes cargo compile the [build-dependencies] in this layer too. Every
# workspace member needs at least an empty crate root, and every [[bench]] target in Cargo.toml
# its file, or the manifest does not load (scripts/check-dockerfile catches a missing one).
RUN mkdir -p src migration/src benches \
 && echo 'fn main() {}' > src/main.rs \
 && echo 'fn main() {}' > build.rs \
 && for bench in streaming session_page search context browser_path cluster; do echo 'fn main() {}' > "benches/$bench.rs"; done \
 && touch migration/src/lib.rs \
 && cargo build --release --locked

# --- Real sources. ----------------------------------------------------------------------------
# build.rs reads templates/ and static/ to embed them, and src/config.rs include_str!s
# config/default.toml, so those are build inputs too.
COPY build.rs ./
# The link order of the code the server runs (scripts/code-order; build.rs hands it to lld).
COPY link ./link
COPY src ./src
COPY migration/src ./migration/src
COPY config ./config
COPY templates ./templates
COPY static ./static
COPY benches ./benches
# COPY keeps the files' original mtimes, which are older than the stub artifacts built above;
# cargo's freshness check is mtime-based, so without the touch it would consider the stubs
# up to date and ship an empty binary.
# The release profile, the one every benchmark measures: build.rs lays its code out by
# link/code-order.txt, whose names match only a build of that profile (BENCHMARKS.md,
# "Container image"). Its symbol table is stripped in the rootfs stage.
RUN touch build.rs src/main.rs migration/src/lib.rs \
 && cargo build --release --locked

# ---------------------------------------------------------------------------------------------
# Runtime file system
# ---------------------------------------------------------------------------------------------
# The image is FROM scratch plus what scripts/assemble-rootfs gathers here: the binary and the
# shared libraries it loads (glibc, found with ldd, so nothing is guessed), tini as PID 1,
# bubblewrap for the agent's shell tool with its libraries, busybox as the shell and commands
# that tool runs, the CA roots for outgoing TLS, /etc/passwd and /etc/group with uid 10001, /tmp
# and /data. 53 MB measured (release binary) instead of ~130 MB on debian:bookworm-slim (BENCHMARKS.md,
# "Container image"). Bookworm, as in the builder: the binary needs that glibc.
FROM debian:bookworm-slim AS rootfs

# Versions are not pinned: bookworm only gets security updates. binutils only strips the
# binary here; it is not in the image.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini bubblewrap busybox-static binutils \
 && rm -rf /var/lib/apt/lists/*

COPY --from=builder /src/target/release/arbor /usr/local/bin/arbor
COPY scripts/assemble-rootfs /usr/local/sbin/assemble-rootfs
# The AGPL text travels with the binary.
COPY LICENSE /rootfs/usr/share/doc/arbor/LICENSE
RUN /usr/local/sbin/assemble-rootfs /rootfs /usr/local/bin/arbor

# ---------------------------------------------------------------------------------------------
# Runtime
# ---------------------------------------------------------------------------------------------
FROM scratch

COPY --from=rootfs /rootfs /
# A new named volume is initialised from the image's /data, ownership included: the fixed,
# non-root uid/gid 10001 (a bind-mounted host directory must be writable by it).
COPY --from=rootfs --chown=10001:10001 /rootfs/data /data

# Fail the image build if the binary cannot even start here (e.g. a missing library).
RUN ["/usr/local/bin/arbor", "--version"]

# Data directory on the volume, listen on all interfaces inside the container (the port is
# only reachable where it is published), JSON logs for log collectors. No malloc setting:
# jemalloc is the binary's `malloc`, for the C code inside too (BENCHMARKS.md, "Soak").
ENV ARBOR_DATA_DIR=/data \
    ARBOR_SERVER__BIND=0.0.0.0:8080 \
    ARBOR_LOG__FORMAT=json

WORKDIR /data
VOLUME ["/data"]

# Numeric so that runtimes which check runAsNonRoot (Kubernetes) can verify it.
USER 10001:10001

EXPOSE 8080

# `arbor healthcheck` is built into the binary so the image needs no curl/wget. It probes
# http://<server.bind>/healthz with 0.0.0.0 replaced by 127.0.0.1 (so a changed
# ARBOR_SERVER__BIND is followed), liveness only (not /readyz), and exits 0 on success.
# Its own request timeout is 5 s; --timeout leaves room for process start on top of that.
# start-period covers migrations on first start.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/arbor", "healthcheck"]

# tini as PID 1 (it forwards SIGTERM to arbor and reaps the agent's child processes); arbor runs
# as its child. Arguments to `docker run IMAGE ...` replace CMD,
# so `docker run IMAGE migrate status` runs `arbor migrate status`.
ENTRYPOINT ["/usr/bin/tini-static", "--", "/usr/local/bin/arbor"]
CMD ["serve"]

# Labels last: changing them never invalidates the layers above.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="Arbor" \
      org.opencontainers.image.description="Self-hosted multi-user server for LLM agents with branching sessions" \
      org.opencontainers.image.licenses="AGPL-3.0-or-later" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
