# syntax=docker/dockerfile:1
# The Gatehouse image for users with a container engine and a registry:
#   docker build -t ghcr.io/gatehouse-dev/gatehouse:0.1.0 .
# It holds the same files as `make image` (bin/gatehouse-image.tar): the
# Rootfs stage runs the same builder (hack/image) with the same layout
# (hack/image/gatehouse.args) in --rootfs mode. Its digest differs from
# make image's (Docker's own timestamps and layer encoding); releases push
# make image's archive (.github/workflows/release.yml), not this.
# Not built on the development machines (no Docker engine there): see the
# README's "Image" section.

# Debian's release: haproxy and its libraries come from it.
ARG DEBIAN_RELEASE=bookworm
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# As make image: static, -trimpath, the chart's appVersion as the version.
RUN version="v$(sed -n 's/^appVersion: *//p' charts/gatehouse/Chart.yaml)" && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=auto \
      -ldflags "-s -w -X github.com/gatehouse-dev/gatehouse/internal/version.Version=${version}" \
      -o /out/gatehouse ./cmd/gatehouse && \
    CGO_ENABLED=0 go build -trimpath -o /out/image ./hack/image

FROM debian:${DEBIAN_RELEASE}-slim AS rootfs
RUN apt-get update && \
    apt-get install -y --no-install-recommends haproxy ca-certificates && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /out/
COPY hack/image/gatehouse.args /out/gatehouse.args
RUN /out/image @/out/gatehouse.args --file=/usr/local/bin/gatehouse=/out/gatehouse --rootfs=/rootfs

FROM scratch
COPY --from=rootfs /rootfs/ /
# The image config of hack/image/gatehouse.args (--user, --env,
# --entrypoint, --label): keep the two alike.
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
ENTRYPOINT ["/usr/local/bin/gatehouse"]
LABEL org.opencontainers.image.source=https://github.com/gatehouse-dev/gatehouse \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.title=gatehouse
