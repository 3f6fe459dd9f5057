/* MX_API marks the declarations of mixrt's public API: the only symbols libmixrt.so exports.
 * The library is compiled with -fvisibility=hidden, so everything not marked (the internal
 * mx__ functions) stays inside it; programs linking libmixrt.a still see all of it. */
#ifndef MIXRT_API_H
#define MIXRT_API_H

#if defined(__GNUC__) || defined(__clang__)
#define MX_API __attribute__((visibility("default")))
#else
#define MX_API
#endif

#endif /* MIXRT_API_H */
