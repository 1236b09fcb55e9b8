# The prefixguard proxy in a container:
#   docker build -t prefixguard-proxy .
#   docker run --rm -p 8080:8080 -v "$PWD/captures:/data" prefixguard-proxy --upstream https://api.anthropic.com
# then point the app at it: ANTHROPIC_BASE_URL=http://127.0.0.1:8080
# Inside the container the proxy listens on every interface (the container's own network); publish the
# port on 127.0.0.1 (`-p 127.0.0.1:8080:8080`) or a private address: the proxy has no authentication.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY prefixguard ./prefixguard
COPY engine ./engine
COPY rules ./rules
RUN pip install '.[proxy]' && rm -rf /src
RUN useradd --create-home --uid 10001 prefixguard && mkdir /data && chown prefixguard /data
USER prefixguard
WORKDIR /data
EXPOSE 8080
VOLUME ["/data"]
ENTRYPOINT ["prefixguard", "proxy", "--host", "0.0.0.0", "--port", "8080", "--store", "/data/capture.db"]
CMD ["--upstream", "https://api.anthropic.com"]
