/*
 * flame_html.h — a profile as one self-contained HTML page holding an interactive flame graph (`hostprof convert
 * --to html`), or a differential one of a profile against a base (`hostprof diff --html`).
 *
 * The page is the template src/profile/flame.html, built into the program (no file is looked up at run time),
 * with the profile's data put in as JSON where the template says. Its script is the template's own: nothing is
 * fetched when the page opens, and the page names no other resource. The script is hand-written, a few hundred
 * lines: a flame graph is a layout of boxes, and what makes it hard here (100,000 stacks opened in about a
 * second, frames as HTML text the browser's find reads, a differential mode) is what a vendored library such as
 * d3-flame-graph (d3 with it, an SVG element per frame) would not give and a reviewer would have to read anyway.
 *
 * The data: every frame once (name, source file or library, frame kind); the stacks of both profiles as one tree
 * of (parent, frame) nodes, a parent before its children, a stack being its leaf node, so a prefix many stacks
 * share is written once, with the first few source lines met at each node (the lines sampled in a leaf function,
 * or a caller's call sites); per
 * profile its threads (pid, tid, process name, thread name) and its samples (leaf node, thread, sample count, CPU
 * ns, off-CPU ns), so the page can weigh stacks by any value (enum profile_value) and fold or split processes
 * and threads without asking again. Frame names are those of frame_name.h, inlined functions frames of their own.
 * Strings, the titles too, are escaped as src/base/escape.h says (the names come from the processes profiled;
 * valid UTF-8 keeps the JSON readable), the verdict excepted (diff's line, whose names are escaped already), then
 * as JSON strings, with every '<' written as \u003c so no string can end the script
 * element it is in or open a comment there.
 *
 * Only reads the profiles. Returns 0, -ENOMEM, -EOVERFLOW (more than 2^31 frames or nodes), or -EIO when
 * writing to out fails.
 */
#ifndef HOSTPROF_FLAME_HTML_H
#define HOSTPROF_FLAME_HTML_H

#include <stdio.h>

#include "src/profile/profile.h"

struct flame_html_options {
	const char *title;	/* shown as the page's title (the input's name); NULL: "hostprof" */
	enum profile_value value;	/* the value the page weighs stacks by when it opens */
	const struct profile *base;	/* non-NULL: a differential flame graph of p against base */
	const char *base_title;	/* base's name, shown with a differential graph; NULL: "base" */
	const char *verdict;	/* a differential graph's verdict line (diff's FAIL or OK), shown; may be NULL */
};

/* o may be NULL for the defaults. */
int flame_html_write(const struct profile *p, FILE *out, const struct flame_html_options *o);

#endif
