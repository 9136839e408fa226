# syntax=docker/dockerfile:1
# Builds both binaries into one small image. The first word of the command
# picks the binary:
#   docker run IMAGE                       the API (the default)
#   docker run IMAGE api migrate           apply the migrations and exit
#   docker run IMAGE provider              the mock payment provider
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The build cache survives between image builds; a cold build takes minutes,
# most of it compiling the pure-Go SQLite driver.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	CGO_ENABLED=0 go build -trimpath -tags nomsgpack -ldflags='-s -w' -o /out/ ./cmd/api ./cmd/provider \
	&& mkdir -p /out/data

# Static binaries need no libc; distroless has no shell, so the binaries are
# called directly from PATH.
FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /app
COPY --from=build /out/api /out/provider /usr/local/bin/
# With DATABASE_URL empty the API keeps its SQLite file in ./data/, which the
# nonroot user has to be able to write.
COPY --from=build --chown=65532:65532 /out/data /app/data
USER 65532:65532
EXPOSE 8080 8081
CMD ["api"]
