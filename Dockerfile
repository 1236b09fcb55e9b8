# The prefixguard proxy in a container:
#   docker build -t prefixguard-proxy .
#   docker run --rm -p 127.0.0.1:8080:8080 -v "$PWD/captures:/data" prefixguard-proxy --upstream https://api.anthropic.com
# then point the app at it: ANTHROPIC_BASE_URL=http://127.0.0.1:8080
# Inside the container the proxy listens on every interface (the container's own network); publish the
# port on 127.0.0.1 (`-p 127.0.0.1:8080:8080`) or a private address: the proxy has no authentication.
#
# Every flag the README documents works in it: the proxy extra, telemetry (--metrics-port,
# --otlp-endpoint) and fleet (--index redis://..., --store postgresql://...).
# The capture goes to the /data volume. The container starts as root only to give the proxy's user
# (uid 10001) the mounted directory when it cannot write it, then runs the proxy as that user
# (docker-entrypoint.sh); or run it as the directory's owner: `docker run --user "$(id -u):$(id -g)" ...`.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY prefixguard ./prefixguard
COPY engine ./engine
COPY rules ./rules
RUN pip install '.[proxy,telemetry,fleet]' && rm -rf /src
# 1777: a named volume starts as a copy of /data, so any --user can write it (a bind mount keeps the host's modes)
RUN useradd --create-home --uid 10001 --user-group prefixguard && mkdir /data && chown prefixguard:prefixguard /data \
    && chmod 1777 /data
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
# a --user other than 10001 has no home: mitmproxy keeps its CA files in $HOME/.mitmproxy
ENV HOME=/tmp
WORKDIR /data
EXPOSE 8080
EXPOSE 9464
VOLUME ["/data"]
ENTRYPOINT ["docker-entrypoint.sh", "prefixguard", "proxy", "--host", "0.0.0.0", "--port", "8080", "--store", "/data/capture.db"]
CMD ["--upstream", "https://api.anthropic.com"]
