// make bench's Java workload: string building, hashing, sorting and a recursive parser, three calls deep and more,
// until the main thread has used the CPU time asked for (ThreadMXBean), so that a slower run does the same work
// per CPU second, not per wall second. Usage: java JavaWork SECONDS; prints "cpu S s, N rounds".
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class JavaWork {
	// A small recursive-descent evaluator: deep Java frames in every sample it takes.
	static int pos;

	static long expr(String s) {
		long v = term(s);
		while (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-'))
			v = s.charAt(pos++) == '+' ? v + term(s) : v - term(s);
		return v;
	}

	static long term(String s) {
		long v = factor(s);
		while (pos < s.length() && s.charAt(pos) == '*') {
			pos++;
			v *= factor(s);
		}
		return v;
	}

	static long factor(String s) {
		if (s.charAt(pos) == '(') {
			pos++;
			long v = expr(s);
			pos++;
			return v;
		}
		long v = 0;
		while (pos < s.length() && Character.isDigit(s.charAt(pos)))
			v = v * 10 + (s.charAt(pos++) - '0');
		return v;
	}

	static String nested(int depth, int seed) {
		if (depth == 0)
			return Integer.toString(seed % 97);
		return "(" + nested(depth - 1, seed * 31 + 7) + (seed % 3 == 0 ? "*" : "+") + nested(depth - 1, seed + 1) + ")";
	}

	static long round(int r) {
		Map<String, Integer> counts = new HashMap<>();
		List<String> words = new ArrayList<>();
		for (int i = 0; i < 2000; i++) {
			String w = Long.toHexString((i * 2654435761L + r) & 0xffffffL | 0x100000L);
			words.add(w);
			counts.merge(w.substring(0, 2), 1, Integer::sum);
		}
		Collections.sort(words);
		pos = 0;
		return expr(nested(8, r)) + counts.size() + words.get(r % words.size()).length();
	}

	public static void main(String[] args) {
		double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
		ThreadMXBean mx = ManagementFactory.getThreadMXBean();
		long sum = 0, rounds = 0;
		while (mx.getCurrentThreadCpuTime() < seconds * 1e9) {
			for (int i = 0; i < 20; i++)
				sum += round((int)rounds * 20 + i);
			rounds++;
		}
		System.out.printf("cpu %.3f s, %d rounds (%d)%n", mx.getCurrentThreadCpuTime() / 1e9, rounds, sum % 10);
	}
}
