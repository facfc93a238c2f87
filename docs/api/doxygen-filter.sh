#!/bin/sh
# doxygen-filter.sh FILE — shows braid.h to Doxygen with its comments as documentation: braid.h is written in
# plain C comments (they read well as they are), and Doxygen only reads /** ... */. A comment that opens a
# line documents what follows it (/**); one after code on the same line documents that code (/**<). Section
# rules ("/* ---- name ---- */") stay plain comments.
exec sed -E -e '/^[[:space:]]*\/\* ----/b' -e 's#^([[:space:]]*)/\* #\1/** #' -e 't' -e 's#([^[:space:]].*)/\* #\1/**< #' "$1"
