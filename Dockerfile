# A static, non-root image of multiproject-controller-manager. No image can be built on the development machines
# (no Docker engine); this is what a release pipeline runs.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY staging/ staging/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/multiproject-controller-manager ./cmd/multiproject-controller-manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/multiproject-controller-manager /usr/local/bin/multiproject-controller-manager
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/multiproject-controller-manager"]
