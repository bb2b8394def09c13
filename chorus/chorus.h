// The whole public API: Contexts and how to build them, the collectives,
// the stores and bootstraps rendezvous goes through, types and errors.
#pragma once

#include "base/error.h"
#include "base/types.h"
#include "base/version.h"
#include "chorus/collectives.h"
#include "chorus/connect.h"
#include "chorus/context.h"
#include "chorus/features.h"
#include "chorus/registered_buffer.h"
#include "chorus/shrink.h"
#include "chorus/window.h"
#include "chorus/work.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"
#if CHORUS_HAVE_REDIS
#include "rendezvous/redis_store.h"
#endif
