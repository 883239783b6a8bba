-- Placeholder so that 0019 (#23, branch sizereads) applies before the migrations
-- numbered 0016 land: delete this file when the real 0016 is merged.
SELECT 1;
