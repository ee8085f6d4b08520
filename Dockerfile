FROM python:3.11-slim
WORKDIR /app
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN pip install --no-cache-dir --no-deps . && useradd --create-home sheetsync
USER sheetsync
CMD ["celery", "-A", "tasks", "worker", "--loglevel=INFO"]
