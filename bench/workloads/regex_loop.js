// make bench's node workload: a regular expression run over a text (V8's irregexp code and its built-ins),
// until the process has used the CPU time asked for (process.cpuUsage()). Usage: node regex_loop.js SECONDS
const seconds = Number(process.argv[2] || 3);
const re = /([a-z]+)@([a-z]+)\.(com|org|net)|(\d{3})-(\d{4})/g;
const text = Array.from({ length: 2000 }, (_, i) => i % 3 ? `user${i} mail${i}x@host${i % 7}.org` : `call ${100 + i % 900}-${1000 + i}`).join(' ');
let n = 0;
while ((process.cpuUsage().user + process.cpuUsage().system) < seconds * 1e6) {
  re.lastIndex = 0;
  let m;
  while ((m = re.exec(text)) !== null) n += m[0].length;
}
console.log(`cpu ${(process.cpuUsage().user / 1e6).toFixed(3)} s, ${n}`);
