/* A stand-in for Windows' bcryptprimitives.dll where Wine's lacks
 * ProcessPrng (Debian bookworm's Wine 8.0). Rust's standard library on
 * Windows calls ProcessPrng since 1.78 (its random source for HashMap
 * keys and the like), so without it no Rust executable starts.
 *
 * It fills the buffer from RtlGenRandom (advapi32's SystemFunction036),
 * which Wine implements, and always reports success as the real one
 * does. Built by ci/wine-setup; not shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
