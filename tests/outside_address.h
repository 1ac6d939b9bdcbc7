/* An IPv4 address of this machine other than loopback, for tests that check a listener is
 * not reachable there. */
#ifndef GC_TESTS_OUTSIDE_ADDRESS_H
#define GC_TESTS_OUTSIDE_ADDRESS_H

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

/* Writes it into text; false when the machine has none. */
static inline bool outside_address(char *text, size_t size) {
    struct ifaddrs *list = NULL;
    bool found = false;
    if (getifaddrs(&list) != 0) return false;
    for (struct ifaddrs *a = list; a && !found; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
        struct in_addr address = ((struct sockaddr_in *)a->ifa_addr)->sin_addr;
        if ((ntohl(address.s_addr) >> 24) == 127) continue;
        found = inet_ntop(AF_INET, &address, text, (socklen_t)size) != NULL;
    }
    freeifaddrs(list);
    return found;
}

#endif
