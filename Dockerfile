# The gateway and worker image for docker-compose.yml (users with Docker; not needed to develop).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# chDB's platform packages are optional dependencies the lock file may not list for this platform.
RUN npm ci --no-audit --no-fund || npm install --no-audit --no-fund
COPY . .
ENV NODE_ENV=production PORT=8787
EXPOSE 8787
# node is PID 1: SIGTERM reaches the gateway's graceful stop directly.
CMD ["node", "--import", "tsx", "src/bin/gateway.ts"]
