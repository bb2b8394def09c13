// The whole public API.
#pragma once

#include "chorus/bootstrap.h"
#include "chorus/collectives.h"
#include "chorus/connect.h"
#include "chorus/context.h"
#include "chorus/error.h"
#include "chorus/store.h"
#include "chorus/types.h"
#include "chorus/work.h"
