// memdir over HTTP from Node.js 18+ (built-in fetch), no packages:
//   MEMDIR_URL=http://127.0.0.1:8000 MEMDIR_API_KEY=mdk_... node examples/server/memdir.mjs acme.alice
// Adds two facts to a namespace, searches them (English and Chinese), and reads MEMORY.md's version.

const base = (process.env.MEMDIR_URL ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const key = process.env.MEMDIR_API_KEY;
const namespace = process.argv[2];
if (!key || !namespace) {
  console.error("usage: MEMDIR_API_KEY=mdk_... node memdir.mjs NAMESPACE  (MEMDIR_URL: the server)");
  process.exit(2);
}

async function call(method, path, body) {
  const response = await fetch(`${base}/v1/namespaces/${encodeURIComponent(namespace)}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    // Errors are RFC 9457 problem documents: one line in "detail".
    const problem = await response.json().catch(() => ({}));
    throw new Error(`${method} ${path}: ${response.status} ${problem.detail ?? response.statusText}`);
  }
  return response.status === 204 ? null : response.json();
}

const added = await call("POST", "/memories", {
  text: "Decision: the shop moves from MySQL 5.7 to PostgreSQL 16\n我们决定把订单服务迁移到 Kafka",
});
console.log(`added ${added.bullets} facts at ${added.citation}`);

for (const query of ["PostgreSQL migration", "订单服务"]) {
  const found = await call("GET", `/search?q=${encodeURIComponent(query)}&limit=3`);
  console.log(`search ${JSON.stringify(query)}:`);
  for (const hit of found.hits) console.log(`  ${hit.citation}  ${hit.content}`);
}
