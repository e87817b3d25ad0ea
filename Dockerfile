# One image for every role (worker, beat, flower, CLI): the command picks the role.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scriptorium ./scriptorium
COPY schemas ./schemas
COPY producers ./producers
COPY workers ./workers
RUN pip install --no-cache-dir ".[cluster,web]"
ENV SCRIPTORIUM_STATE=/data
VOLUME ["/data"]
CMD ["scriptorium", "--help"]
