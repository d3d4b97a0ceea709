/* version: the one place the version is defined. The command prints it;
 * the library carries it as BS_VERSION_MARK followed by the version, which
 * `backoffshim --version` reads from the library file it would load. */
#ifndef BS_VERSION_H
#define BS_VERSION_H

#define BS_VERSION "0.4.0"
#define BS_VERSION_MARK "@(#)libbackoffshim "

#endif
