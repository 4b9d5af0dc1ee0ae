# The gateway and worker image for docker-compose.yml (users with Docker; not needed to develop).
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
ENV NODE_ENV=production PORT=8787
EXPOSE 8787
CMD ["npm", "start"]
