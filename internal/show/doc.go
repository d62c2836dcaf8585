// Package show writes each command's result for people: the tables and
// lines of the default output. -o json and -o yaml print the same values as
// data; nothing here decides or computes, it only shows.
package show
