-- Placeholder so that 0019 (#23, branch sizereads) applies before the migrations
-- numbered 0017 land: delete this file when the real 0017 is merged.
SELECT 1;
